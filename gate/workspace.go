package gate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/reputation"
	"github.com/delegateos/delegateos/revocation"
	"github.com/delegateos/delegateos/verify"
)

// The DelegateOS files of a workspace, next to RDP's reputation/ and
// contracts/ directories.
const (
	WorkspaceDelegations   = "delegations.jsonl"
	WorkspaceTaskContracts = "task-contracts"
	WorkspaceAttestations  = "attestations"
	// WorkspacePlans holds the signed decomposition plans, where the
	// gate looks for the dependencies of sub-tasks.
	WorkspacePlans = "plans"
	// WorkspaceRevocations is the durable copy of a Redis revocation list.
	WorkspaceRevocations = "revocations.json"
)

// openDelegations sets up the handling of the delegation messages over the
// policy's workspace: the chain log, the task contracts and attestations
// next to the RDP reputation files. It returns nil when the policy names no
// workspace.
func openDelegations(pol *policy.Policy, v *dct.Verifier, revs revocation.Live, spend budget.Store, stateDir string, log *zap.Logger) (*Delegations, func(), error) {
	if pol.Workspace == "" {
		return nil, func() {}, nil
	}
	if err := os.MkdirAll(pol.Workspace, 0o755); err != nil {
		return nil, nil, fmt.Errorf("workspace: %w", err)
	}
	var chainStore chain.Store
	chainStore, err := chain.OpenFile(filepath.Join(pol.Workspace, WorkspaceDelegations))
	if err != nil {
		return nil, nil, fmt.Errorf("workspace: %w", err)
	}
	if pol.EndedDelegations != "" {
		// A durable copy of the set per machine, in the state directory
		// the spend store keeps its identity in: an ending the set loses
		// while no proxy that knew it runs is written back by the next
		// proxy of this machine, whatever its workspace.
		copyPath := ""
		if stateDir != "" {
			copyPath = filepath.Join(stateDir, chain.StateCopyName(pol.EndedDelegations))
		} else {
			log.Warn("no state directory (neither DELEGATEOS_STATE_DIR, XDG_STATE_HOME nor a home directory is set): an ending the ended-delegation set loses while no proxy that knows it runs is not written back; set DELEGATEOS_STATE_DIR")
		}
		shared, err := chain.OpenSharedCopy(chainStore, pol.EndedDelegations, copyPath, budget.MakeStateDir)
		if err != nil {
			chainStore.Close()
			return nil, nil, fmt.Errorf("ended_delegations: %w", err)
		}
		chainStore = shared
	}
	contracts, err := contract.OpenDir(filepath.Join(pol.Workspace, WorkspaceTaskContracts))
	if err != nil {
		chainStore.Close()
		return nil, nil, fmt.Errorf("workspace: %w", err)
	}
	atts, err := attest.OpenDir(filepath.Join(pol.Workspace, WorkspaceAttestations))
	if err != nil {
		chainStore.Close()
		return nil, nil, fmt.Errorf("workspace: %w", err)
	}
	plans, err := contract.OpenPlanDir(filepath.Join(pol.Workspace, WorkspacePlans))
	if err != nil {
		chainStore.Close()
		return nil, nil, fmt.Errorf("workspace: %w", err)
	}
	plans.Warn = func(msg string) { log.Warn("decomposition plans", zap.String("warning", msg)) }
	outputs := &verify.Verifier{Warn: func(msg string) { log.Warn("verification", zap.String("warning", msg)) }}
	if len(pol.Judge.Command) > 0 {
		timeout := pol.Judge.Timeout
		if timeout == 0 {
			timeout = policy.DefaultJudgeTimeout
		}
		outputs.Judge = &verify.CommandJudge{Command: pol.Judge.Command, Timeout: timeout}
	}
	d := &Delegations{
		Verifier:       v,
		Chain:          chainStore,
		Contracts:      contracts,
		Attestations:   atts,
		Attest:         &attest.Verifier{Contracts: contracts, Attestations: atts, Output: outputs},
		Spent:          func(tok *dct.Token) int64 { return SpentUnder(spend, tok) },
		SpentAt:        spend.Spent,
		RevocationList: pol.RevocationList,
		Plans:          plans,
	}
	if revs != nil {
		d.Revocations = revs
	}
	if err := linkReputation(d, pol, log); err != nil {
		chainStore.Close()
		return nil, nil, err
	}
	return d, func() { chainStore.Close() }, nil
}

// reputationLink is the delegation ID an RDP contract links to: the
// delegation's ID (contracts/del-<id>.md), or, when another delegation of
// the chain has the same ID, the ID and the key ("del_…@key", a
// contracts/del-x-… file), so that two delegations sharing an ID never
// share a contract, whichever ended first.
func reputationLink(c chain.Store, del chain.Delegation) string {
	if same, err := c.WithID(del.ID); err == nil && len(same) == 1 {
		return del.ID
	}
	return del.ID + "@" + del.Key
}

// linkReputation records the outcome of every completed or failed
// delegation in the workspace's RDP files (the delegate's profile gets the
// signals), and applies the policy's trust gate to delegateos/delegate.
func linkReputation(d *Delegations, pol *policy.Policy, log *zap.Logger) error {
	ws, err := reputation.Open(pol.Workspace)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	completeness, clarity := policy.DefaultCriterionScore, policy.DefaultCriterionScore
	if c := pol.Reputation.Completeness; c != nil {
		completeness = *c
	}
	if c := pol.Reputation.Clarity; c != nil {
		clarity = *c
	}
	d.OnOutcome = func(o Outcome) error {
		ro := reputation.Outcome{
			DelegationID:      reputationLink(d.Chain, o.Delegation),
			TaskContractID:    o.Contract.ID,
			Delegator:         o.Delegation.From,
			Delegate:          o.Delegation.To,
			Title:             o.Contract.Task.Title,
			Passed:            o.Passed,
			VerificationScore: o.Score,
			CompletedAt:       o.At,
			Completeness:      &completeness,
			Clarity:           &clarity,
		}
		ancestors, err := tokenAncestors(o.Delegation.DCT.Token)
		if err != nil {
			log.Error("reputation not recorded", zap.String("delegation", o.Delegation.ID), zap.Error(err))
			return err
		}
		ro.Ancestors = ancestors
		if t, err := timestamp.Parse(o.Delegation.CreatedAt); err == nil {
			ro.Created = t
		}
		if t, err := o.Contract.Deadline(); err == nil {
			ro.Deadline = t
		}
		c, signals, err := ws.RecordOutcome(ro, o.At)
		if errors.Is(err, reputation.ErrSelfDealing) {
			log.Warn("no reputation signal: self-dealing", zap.String("delegation", o.Delegation.ID), zap.Error(err))
			return err
		}
		if err != nil {
			log.Error("reputation not recorded", zap.String("delegation", o.Delegation.ID), zap.Error(err))
			return err
		}
		log.Info("reputation recorded", zap.String("delegation", o.Delegation.ID), zap.String("rdp_contract", c.ID()), zap.Int("signals", len(signals)))
		return nil
	}
	if g := pol.Reputation.TrustGate; g != nil {
		gate, err := TrustGateOf(g)
		if err != nil {
			return err
		}
		d.Trust = func(delegatee string, now time.Time) (bool, string, error) {
			v, err := ws.Trust(delegatee, now)
			if err != nil {
				return false, "", err
			}
			ok, reason := gate.Allow(v)
			return ok, reason, nil
		}
	}
	return nil
}

// tokenAncestors returns the principals a delegation's token passed
// through before its last holder: the root issuer and every delegatee but
// the last. The reputation workspace refuses an outcome whose delegate is
// among them (it would rate itself through the delegator).
func tokenAncestors(token string) ([]string, error) {
	tok, err := dct.Parse(token)
	if err != nil {
		return nil, fmt.Errorf("the delegation's token cannot be read: %w", err)
	}
	st := tok.Unverified()
	out := []string{st.Authority.Issuer}
	holders := []string{st.Authority.Delegatee}
	for _, a := range st.Attenuations {
		holders = append(holders, a.Delegatee)
	}
	return append(out, holders[:len(holders)-1]...), nil
}

// trustGate builds the reputation package's gate from the policy's,
// naming trusted attesters by did:key as signals name their sources.
func TrustGateOf(g *policy.TrustGate) (reputation.TrustGate, error) {
	tg := reputation.TrustGate{MinReliability: g.MinReliability, MinConfidence: g.MinConfidence}
	if f := g.StarterFloor; f != nil {
		sf := &reputation.StarterFloor{MinAttesters: f.MinAttesters}
		for _, id := range f.TrustedAttesters {
			did, err := identity.DIDFromPrincipalID(id)
			if err != nil {
				return reputation.TrustGate{}, fmt.Errorf("trusted attester %s: %w", id, err)
			}
			sf.TrustedAttesters = append(sf.TrustedAttesters, did)
		}
		tg.StarterFloor = sf
	}
	return tg, nil
}
