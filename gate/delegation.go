package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/strictjson"
	"github.com/delegateos/delegateos/revocation"
)

// Delegations answers the delegation messages of DelegateOS §9 for a proxy
// session: delegateos/delegate binds the session to a verified contract and
// DCT and records the delegation chain; delegateos/complete verifies an
// attestation and records the delegation completed or failed;
// delegateos/revoke adds a verified revocation to the list the gate reads.
type Delegations struct {
	// Verifier verifies the DCTs of delegate messages, with the trusted
	// roots and revocation list the gate uses; nil refuses every delegate.
	Verifier *dct.Verifier
	// Chain records delegations; Contracts the contracts delegated.
	Chain     chain.Store
	Contracts contract.Store
	// Attestations stores the attestations of delegateos/complete, and
	// Attest verifies them (§7.3, recursively); its Contracts should be
	// Contracts and its Attestations Attestations. Either nil refuses
	// delegateos/complete.
	Attestations attest.Store
	Attest       *attest.Verifier
	// Spent, when set, returns what the proxy recorded as spent under a
	// delegation's token, so an attestation cannot report less.
	Spent func(tok *dct.Token) int64
	// SpentAt, when set, returns what was spent at a budget level key; a
	// new plan is checked against earlier plans' allotments less it (nil:
	// nothing counts as spent, the stricter check).
	SpentAt func(key string) int64
	// OnOutcome, when set, is told of every delegation recorded completed
	// or failed (the reputation workspace hangs off it). An error is
	// reported in the reply but does not undo the record.
	OnOutcome func(o Outcome) error
	// RevocationList is the revocation list file delegateos/revoke appends
	// to, and Revocations the live view of it the Verifier reads (reloaded
	// after an append so the revocation is in force at once). An empty
	// RevocationList refuses delegateos/revoke.
	RevocationList string
	Revocations    interface{ Reload() error }
	// Trust, when set, is asked whether a delegate may be given work.
	Trust func(delegatee string, now time.Time) (ok bool, reason string, err error)
	// Plans, when set, holds the decomposition plans of the workspace:
	// calls and completions under a sub-task wait for its dependencies
	// (Pending), and a delegation a plan splits completes only with its
	// sub-tasks' completions.
	Plans *contract.PlanDir
	// planMu serializes delegateos/decompose: check and record.
	planMu sync.Mutex
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu         sync.Mutex
	completing map[string]bool // delegations whose attestation is being verified

	// reloaded holds the Verifier of the roots a reload put in force, in
	// place of Verifier (Current.Reload); nil until roots change.
	reloaded atomic.Pointer[reloadedVerifier]
}

type reloadedVerifier struct{ v *dct.Verifier } // nil: no roots

// verifier is the Verifier of the roots in force.
func (d *Delegations) verifier() *dct.Verifier {
	if r := d.reloaded.Load(); r != nil {
		return r.v
	}
	return d.Verifier
}

// maxCompletions bounds the attestations verified at once: each may run a
// judge command.
const maxCompletions = 4

// Ended reports whether a delegation is recorded as ended (completed,
// failed or revoked) in the chain store as it stands now, so that the Gate
// refuses calls under it. Every proxy sharing the store sees an ending at
// its next call: a chain.File looks at its log (one stat) and replays what
// other processes appended since. A store that cannot be read ends every
// delegation, with a status saying so.
//
// The delegation is looked up by the link's Key, which its token's blocks
// fix: a delegation of someone else's that shares its ID neither ends it
// nor is ended with it. A link without a key (not from a verified token)
// is refused. The one lookup by ID is of an ending an older proxy shared
// by ID (chain.Shared.StatusByID), which ends every delegation with it.
func (d *Delegations) Ended(l dct.ChainLink) (string, bool) {
	if l.Key == "" {
		return "unknown: the delegation has no key", true
	}
	st, recorded, err := d.status(l.Key)
	if err == nil && !(recorded && st != chain.StatusActive) {
		if legacy, ok := d.Chain.(idEndings); ok {
			st, recorded, err = legacy.StatusByID(l.DelegationID)
		}
	}
	switch {
	case errors.Is(err, redisconn.ErrUnavailable):
		return unavailableStatus + ": " + err.Error(), true
	case err != nil:
		return "unknown: the delegation chain cannot be read", true
	case recorded && st != chain.StatusActive:
		return string(st), true
	}
	return "", false
}

// idEndings is a store that also holds endings recorded by delegation ID,
// as an older proxy shared them (chain.Shared).
type idEndings interface {
	StatusByID(id string) (chain.Status, bool, error)
}

var _ idEndings = (*chain.Shared)(nil)

// revokedSince says why a delegation recorded active may no longer be
// completed: its token is revoked by the list the gate reads (a CLI
// revocation reaches the list, not the chain), or a delegation above it
// in the chain was revoked. "" means neither.
func (d *Delegations) revokedSince(del chain.Delegation) string {
	if v := d.verifier(); v != nil {
		if _, err := v.VerifyChain(del.DCT.Token, d.now()); errors.Is(err, dct.ErrRevoked) {
			return "its token is revoked (" + err.Error() + ")"
		}
	}
	if tok, err := dct.Parse(del.DCT.Token); err == nil {
		keys, ids := tok.DelegationKeys(), blockDelegationIDs(tok)
		for i, key := range keys {
			if status, recorded, err := d.status(key); err == nil && recorded && status == chain.StatusRevoked {
				return "delegation " + ids[i] + " above it was revoked"
			}
		}
	}
	return ""
}

// blockDelegationIDs is the delegation ID of each block, authority first.
func blockDelegationIDs(tok *dct.Token) []string {
	st := tok.Unverified()
	ids := []string{st.Authority.DelegationID}
	for _, a := range st.Attenuations {
		ids = append(ids, a.DelegationID)
	}
	return ids
}

// status asks the chain store for a delegation's status by key, through
// chain.StatusReader when the store has it.
func (d *Delegations) status(key string) (chain.Status, bool, error) {
	if r, ok := d.Chain.(chain.StatusReader); ok {
		return r.Status(key)
	}
	del, err := d.Chain.Get(key)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return del.Status, true, nil
}

// Outcome is a delegation recorded completed or failed.
type Outcome struct {
	Delegation  chain.Delegation
	Contract    *contract.TaskContract
	Attestation *attest.Attestation
	Report      *attest.Report
	// Passed is the verdict: the attestation verified and reports success.
	Passed bool
	// Score is the output's verification score, when there is one.
	Score *float64
	At    time.Time
}

// Binding is what an accepted delegateos/delegate sets for the session:
// calls without their own DCT use Token, and are bound to its contract.
type Binding struct {
	Token        string
	ContractID   string
	DelegationID string
	// DelegationKey identifies the delegation (dct.Token.DelegationKeys):
	// its ID may be another delegation's too.
	DelegationKey string
}

func (d *Delegations) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// MessageError is a JSON-RPC error a delegation message is answered with
// when it cannot even be read or acted on (a refusal of a well-formed
// request is a result: §9.3's reject).
type MessageError struct {
	Code    int
	Message string
	// Detail is logged, not sent to the client.
	Detail string
}

func (e *MessageError) Error() string { return e.Message }

// The JSON-RPC error codes of MessageError.
const (
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

func invalidParams(format string, args ...any) *MessageError {
	return &MessageError{Code: CodeInvalidParams, Message: "invalid params: " + fmt.Sprintf(format, args...)}
}

func reject(reason, format string, args ...any) DelegateResult {
	return DelegateResult{Accepted: false, Reason: reason, Details: fmt.Sprintf(format, args...)}
}

// Delegate handles delegateos/delegate (§9.1). The contract must verify and
// be signed by the delegator (the principal that signed the token's last
// block), the token must verify (§10.1, with revocation and expiry), name
// the message's delegation and parent delegation IDs and be bound to the
// contract and cover its required capabilities (§5.2); then the chain of
// delegations the token carries is recorded (§8.2 invariants checked on
// each insert). On accept the session's Binding is returned.
func (d *Delegations) Delegate(params json.RawMessage) (DelegateResult, *Binding, error) {
	var p DelegateParams
	if err := strictjson.Unmarshal(params, &p); err != nil {
		return DelegateResult{}, nil, invalidParams("%v", err)
	}
	switch {
	case len(p.Contract) == 0 || string(p.Contract) == "null":
		return DelegateResult{}, nil, invalidParams("contract is required")
	case p.DCT == "":
		return DelegateResult{}, nil, invalidParams("dct is required")
	case p.DCTFormat != dct.Format:
		return DelegateResult{}, nil, invalidParams("dctFormat must be %q", dct.Format)
	case p.DelegationID == "" || p.ParentDelegationID == "":
		return DelegateResult{}, nil, invalidParams("delegationId and parentDelegationId are required")
	}
	now := d.now()
	c, err := contract.Parse(p.Contract)
	if err == nil {
		err = c.Verify()
	}
	if err != nil {
		return reject(RejectInvalidContract, "%v", err), nil, nil
	}
	if err := c.CheckDeadline(now); err != nil {
		return reject(RejectInvalidContract, "%v", err), nil, nil
	}
	v := d.verifier()
	if v == nil {
		return reject(RejectInvalidToken, "this proxy trusts no root, so no token can be accepted"), nil, nil
	}
	scope, err := v.VerifyChain(p.DCT, now)
	if err != nil {
		return reject(RejectInvalidToken, "%v", err), nil, nil
	}
	tok, err := dct.Parse(p.DCT)
	if err != nil { // VerifyChain parsed it already
		return reject(RejectInvalidToken, "%v", err), nil, nil
	}
	if ids := contractIDs(tok); slices.Contains(ids[:len(ids)-1], ids[len(ids)-1]) {
		// A delegation reusing an ancestor's contract ID could have its own
		// contract stored under that ID and judge the ancestor's work by it.
		return reject(RejectContractMismatch, "the token's delegation %s is bound to contract %s, which an earlier delegation in its chain is bound to: each delegated task needs its own contract (attenuate with --contract)", scope.DelegationID, ids[len(ids)-1]), nil, nil
	}
	if scope.DelegationID != p.DelegationID {
		return reject(RejectDelegationMismatch, "the message names delegation %s but the token is for %s", p.DelegationID, scope.DelegationID), nil, nil
	}
	if parent := parentDelegationID(tok); parent != p.ParentDelegationID {
		return reject(RejectDelegationMismatch, "the message names parent delegation %s but the token's is %s", p.ParentDelegationID, parent), nil, nil
	}
	if err := contract.CheckBinding(c, scope); err != nil {
		var be *contract.BindingError
		if errors.As(err, &be) && be.Reason == contract.CapabilityMismatch {
			return reject(RejectCapabilityMismatch, "%v", err), nil, nil
		}
		return reject(RejectContractMismatch, "%v", err), nil, nil
	}
	// The delegator signs the contract: anyone else could pair the token
	// with a contract of their own under the same ID.
	signers := tok.Signers()
	if delegator := signers[len(signers)-1]; c.Issuer != delegator {
		return reject(RejectInvalidContract, "the contract is signed by %s, not by the delegator %s", c.Issuer, delegator), nil, nil
	}
	if res := d.checkPlanned(c, tok); res != nil {
		return *res, nil, nil
	}
	if d.Trust != nil {
		ok, reason, err := d.Trust(scope.Delegatee, now)
		if err != nil {
			return reject(RejectInternal, "the reputation workspace cannot be read: %v", err), nil, nil
		}
		if !ok {
			return reject(RejectUntrusted, "%s", reason), nil, nil
		}
	}
	if err := d.Contracts.Put(c); err != nil {
		if errors.Is(err, contract.ErrConflict) {
			return reject(RejectContractMismatch, "a different contract with ID %s was delegated before", c.ID), nil, nil
		}
		return reject(RejectInternal, "the contract cannot be stored: %v", err), nil, nil
	}
	if res := d.record(tok, now); res != nil {
		return *res, nil, nil
	}
	keys := tok.DelegationKeys()
	return DelegateResult{Accepted: true, DelegationID: p.DelegationID},
		&Binding{Token: p.DCT, ContractID: c.ID, DelegationID: p.DelegationID, DelegationKey: keys[len(keys)-1]}, nil
}

// record inserts the delegations of a verified token's chain that the store
// does not hold yet, each looked up by its key: another delegation with the
// same ID is another delegation. One it holds must be the same delegation
// (same token) and, for the token's own delegation, still active.
func (d *Delegations) record(tok *dct.Token, now time.Time) *DelegateResult {
	records, err := chain.Records(tok, now)
	if err != nil {
		r := reject(RejectChainInvariant, "%v", err)
		return &r
	}
	for i, rec := range records {
		held, err := d.Chain.Get(rec.Key)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			err := d.Chain.Insert(rec)
			if err == nil {
				continue
			}
			if !errors.Is(err, chain.ErrDuplicate) {
				r := reject(RejectChainInvariant, "%v", err)
				return &r
			}
			// Another proxy on the same log recorded it first.
			if held, err = d.Chain.Get(rec.Key); err != nil {
				r := reject(RejectInternal, "the delegation chain cannot be read: %v", err)
				return &r
			}
		case err != nil:
			r := reject(RejectInternal, "the delegation chain cannot be read: %v", err)
			return &r
		}
		if held.DCT.Token != rec.DCT.Token {
			r := reject(RejectChainInvariant, "delegation %s is recorded with a different token", rec.ID)
			return &r
		}
		if i == len(records)-1 && held.Status != chain.StatusActive {
			r := reject(RejectChainInvariant, "delegation %s has already ended (%s)", rec.ID, held.Status)
			return &r
		}
	}
	return nil
}

// contractIDs is the contract ID of each block of a token, authority first.
func contractIDs(tok *dct.Token) []string {
	t := tok.Unverified()
	ids := []string{t.Authority.ContractID}
	for _, a := range t.Attenuations {
		ids = append(ids, a.ContractID)
	}
	return ids
}

// parentDelegationID is the delegation ID of the block before the token's
// last, or the authority's parentDelegationId for a root token.
func parentDelegationID(tok *dct.Token) string {
	t := tok.Unverified()
	switch n := len(t.Attenuations); n {
	case 0:
		return t.Authority.ParentDelegationID
	case 1:
		return t.Authority.DelegationID
	default:
		return t.Attenuations[n-2].DelegationID
	}
}

// Complete handles delegateos/complete (§9.4). The delegation must be
// recorded and active, and the attestation must be the delegatee's own, for
// that delegation and its contract, and signed. It is stored, then verified
// (§7.3: output schema, the contract's verification spec, budget,
// recursively through its children); the delegation is recorded completed
// when the verdict is passed and failed otherwise. When a check could not
// run at all (no judge configured, a store error) nothing is recorded and
// the delegation stays active, so it can be completed again.
func (d *Delegations) Complete(ctx context.Context, params json.RawMessage) (CompleteResult, error) {
	return d.CompleteIn(ctx, params, nil)
}

// CompleteIn is Complete for a session bound to a delegation (nil: none).
// The message names the delegation by ID, which another delegation may
// share. An attestation that names a delegation key (attest.Attestation
// DelegationKey, signed) completes only the delegation with that key.
// Without one (an attestation made before keys), the one completed is the
// delegation with that ID whose delegatee signed the attestation, for its
// contract; when several are, the one the session is bound to, and none
// otherwise. Such an attestation is bound to names only, so it can be
// replayed against another delegation with the same IDs recorded at
// another workspace: attest with the delegation key.
func (d *Delegations) CompleteIn(ctx context.Context, params json.RawMessage, bound *Binding) (CompleteResult, error) {
	var p CompleteParams
	if err := strictjson.Unmarshal(params, &p); err != nil {
		return CompleteResult{}, invalidParams("%v", err)
	}
	if p.DelegationID == "" || len(p.Attestation) == 0 || string(p.Attestation) == "null" {
		return CompleteResult{}, invalidParams("delegationId and attestation are required")
	}
	if d.Attest == nil || d.Attestations == nil {
		return CompleteResult{}, &MessageError{Code: CodeInternalError, Message: "this proxy cannot verify attestations"}
	}
	a, err := attest.Parse(p.Attestation)
	if err == nil {
		err = a.Verify()
	}
	if err != nil {
		return CompleteResult{}, invalidParams("attestation: %v", err)
	}
	del, err := d.toComplete(p.DelegationID, a, bound)
	if err != nil {
		return CompleteResult{}, err
	}
	if del.Status != chain.StatusActive {
		return CompleteResult{}, invalidParams("delegation %s has already ended (%s)", del.ID, del.Status)
	}
	if why := d.revokedSince(del); why != "" {
		return CompleteResult{}, invalidParams("delegation %s cannot be completed: %s", del.ID, why)
	}
	switch {
	case a.DelegationKey != "" && a.DelegationKey != del.Key:
		// Work attested for one delegation never completes another that
		// shares its names (a sybil's, recorded at another workspace).
		return CompleteResult{}, invalidParams("the attestation is for delegation key %s, not delegation %s's key %s", a.DelegationKey, del.ID, del.Key)
	case a.DelegationID != del.ID:
		return CompleteResult{}, invalidParams("the attestation is for delegation %s, not %s", a.DelegationID, del.ID)
	case a.ContractID != del.ContractID:
		return CompleteResult{}, invalidParams("the attestation is for contract %s, but delegation %s is bound to %s", a.ContractID, del.ID, del.ContractID)
	case a.Principal != del.To:
		return CompleteResult{}, invalidParams("the attestation is signed by %s, not by the delegatee %s", a.Principal, del.To)
	case a.Type != attest.Completion:
		return CompleteResult{}, invalidParams("the attestation's type is %s; completing a delegation takes a %s attestation", a.Type, attest.Completion)
	}
	c, err := d.Contracts.Get(del.ContractID)
	if errors.Is(err, fs.ErrNotExist) {
		return CompleteResult{}, invalidParams("no contract was delegated for delegation %s: send delegateos/delegate with its contract first", del.ID)
	}
	if err != nil {
		return CompleteResult{}, internalError("contract %s of delegation %s cannot be read", del.ContractID, del.ID)
	}
	if c.Issuer != del.From {
		// Only the delegator's own contract says what this work owed.
		return CompleteResult{}, invalidParams("contract %s was not issued by %s, who delegated %s: send delegateos/delegate with the delegator's contract first", c.ID, del.From, del.ID)
	}
	if why := d.pendingFor(del); why != "" {
		return CompleteResult{}, invalidParams("%s: %s", DependencyPending, why)
	}
	failedChildren, err := d.splitBy(del, a.ChildAttestations)
	if err != nil {
		return CompleteResult{}, err
	}
	if err := d.begin(del.Key); err != nil {
		return CompleteResult{}, err
	}
	defer d.end(del.Key)
	if del, err = d.Chain.Get(del.Key); err != nil || del.Status != chain.StatusActive {
		return CompleteResult{}, invalidParams("delegation %s has already ended", p.DelegationID)
	}
	report, _ := d.Attest.Verify(ctx, a)
	if report == nil || report.Verdict == attest.Unverified {
		// The reasons (a judge's error output, file paths) stay in the log.
		return CompleteResult{}, &MessageError{Code: CodeInternalError, Message: fmt.Sprintf("the attestation could not be verified, so delegation %s stays active; the proxy's log says why", del.ID),
			Detail: strings.Join(problems(report), "; ")}
	}
	if err := d.Attestations.Put(a); err != nil {
		if errors.Is(err, attest.ErrConflict) {
			return CompleteResult{}, invalidParams("a different attestation with ID %s was recorded before", a.ID)
		}
		return CompleteResult{}, internalError("the attestation cannot be stored")
	}
	res := CompleteResult{DelegationID: del.ID, DelegationKey: del.Key, AttestationID: a.ID, Verified: report.Verdict == attest.Passed, Problems: problems(report)}
	if st, ok := report.Step(attest.StepVerification); ok && st.Check != nil {
		res.Score = st.Check.Score
		if res.Score == nil {
			score := 0.0
			if st.Check.Passed {
				score = 1
			}
			res.Score = &score
		}
	}
	if d.Spent != nil {
		if tok, err := dct.Parse(del.DCT.Token); err == nil {
			if spent := d.Spent(tok); a.Result.CostMicrocents < spent {
				res.Verified = false
				res.Problems = append(res.Problems, fmt.Sprintf("cost: the attestation reports %d microcents but the proxy recorded %d spent under this delegation", a.Result.CostMicrocents, spent))
			}
		}
	}
	if len(failedChildren) > 0 {
		// A failed sub-task fails the task it was split from.
		res.Verified = false
		res.Problems = append(res.Problems, failedChildren...)
	}
	passed := res.Verified && a.Result.Success
	now := d.now()
	if passed {
		res.Status = string(chain.StatusCompleted)
		err = d.Chain.Complete(del.Key, a.ID, now)
	} else {
		res.Status = string(chain.StatusFailed)
		err = d.Chain.Fail(del.Key, a.ID, now)
	}
	if err != nil {
		return CompleteResult{}, internalError("delegation %s cannot be recorded as %s: %v", del.ID, res.Status, err)
	}
	if d.OnOutcome != nil {
		del.Status, del.AttestationID = chain.Status(res.Status), a.ID
		o := Outcome{Delegation: del, Contract: c, Attestation: a, Report: report, Passed: passed, Score: res.Score, At: now}
		if err := d.OnOutcome(o); err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("reputation: the outcome was not recorded: %v", err))
		}
	}
	return res, nil
}

// toComplete finds the delegation a delegateos/complete names by ID: of
// those with the ID, the ones whose delegatee signed the attestation; of
// several, the one the session is bound to.
func (d *Delegations) toComplete(id string, a *attest.Attestation, bound *Binding) (chain.Delegation, error) {
	all, err := d.Chain.WithID(id)
	if err != nil {
		return chain.Delegation{}, internalError("the delegation chain cannot be read: %v", err)
	}
	if len(all) == 0 {
		return chain.Delegation{}, invalidParams("delegation %s is not recorded: send delegateos/delegate first", id)
	}
	if a.DelegationKey != "" {
		// The attestation names the delegation it was made for.
		for _, del := range all {
			if del.Key == a.DelegationKey {
				return del, nil
			}
		}
		return chain.Delegation{}, invalidParams("the attestation is for delegation %s with key %s, which is not recorded here", id, a.DelegationKey)
	}
	if len(all) == 1 {
		// The checks that follow say what does not match.
		return all[0], nil
	}
	mine := slices.DeleteFunc(all, func(del chain.Delegation) bool { return del.To != a.Principal })
	switch {
	case len(mine) == 1:
		return mine[0], nil
	case len(mine) == 0:
		return chain.Delegation{}, invalidParams("the attestation is signed by %s, who is not the delegatee of any delegation %s recorded here", a.Principal, id)
	}
	if bound != nil {
		for _, del := range mine {
			if del.Key == bound.DelegationKey {
				return del, nil
			}
		}
	}
	return chain.Delegation{}, invalidParams("%d delegations %s to %s are recorded: send delegateos/complete in the session bound to the one completed (delegateos/delegate)", len(mine), id, a.Principal)
}

// problems lists the steps of a report that did not pass, children included.
func problems(r *attest.Report) []string {
	if r == nil {
		return nil
	}
	var out []string
	for _, st := range r.Steps {
		if st.Status != attest.StatusOK && st.Status != attest.StatusSkipped {
			msg := string(st.Name) + ": " + string(st.Status)
			if st.Detail != "" {
				msg += ": " + st.Detail
			}
			out = append(out, msg)
		}
	}
	for _, c := range r.Children {
		for _, p := range problems(c) {
			out = append(out, c.AttestationID+": "+p)
		}
	}
	return out
}

// begin claims a delegation for verification: one attestation at a time
// per delegation, and at most maxCompletions in all.
func (d *Delegations) begin(id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.completing[id] {
		return invalidParams("delegation %s is already being completed", id)
	}
	if len(d.completing) >= maxCompletions {
		return &MessageError{Code: CodeInternalError, Message: fmt.Sprintf("%d attestations are being verified; try again shortly", maxCompletions)}
	}
	if d.completing == nil {
		d.completing = map[string]bool{}
	}
	d.completing[id] = true
	return nil
}

func (d *Delegations) end(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.completing, id)
}

func internalError(format string, args ...any) *MessageError {
	return &MessageError{Code: CodeInternalError, Message: fmt.Sprintf(format, args...)}
}

// Revoke handles delegateos/revoke (§9.5): a revocation entry whose
// signature verifies is appended to the revocation list and in force at
// once. The recorded delegation whose token ends with the revoked block,
// when the revoker signed that block or one before it (the rule the
// verifier applies), is recorded revoked with its active descendants,
// whatever the entry's scope: either revokes every token containing the
// block.
func (d *Delegations) Revoke(params json.RawMessage) (RevokeResult, error) {
	var p RevokeParams
	if err := strictjson.Unmarshal(params, &p); err != nil {
		return RevokeResult{}, invalidParams("%v", err)
	}
	var e revocation.Entry
	if err := strictjson.Unmarshal(p.Revocation, &e); err != nil {
		return RevokeResult{}, invalidParams("revocation: %v", err)
	}
	if err := e.Verify(); err != nil {
		return RevokeResult{}, invalidParams("revocation: %v", err)
	}
	if d.RevocationList == "" {
		return RevokeResult{}, internalError("this proxy has no revocation list (set revocation_list in its policy)")
	}
	ds, err := d.Chain.List()
	if err != nil {
		return RevokeResult{}, internalError("the delegation chain cannot be read")
	}
	// Only an entry a verifier would honour for a delegation recorded here
	// is accepted: anyone can sign an entry, and the list is read on every
	// call. The delegation whose token ends with the revoked block is the
	// one revoked.
	var target *chain.Delegation
	honoured := false
	for i := range ds {
		tok, err := dct.Parse(ds[i].DCT.Token)
		if err != nil {
			continue
		}
		ids, signers := tok.RevocationIDs(), tok.Signers()
		for b, id := range ids {
			if id == e.RevocationID && slices.Contains(signers[:b+1], e.RevokedBy) {
				honoured = true
				if b == len(ids)-1 {
					target = &ds[i]
				}
			}
		}
	}
	if !honoured {
		return RevokeResult{}, invalidParams("revocation: %s names no block of a delegation recorded here that %s signed or issued, so no verifier would honour it", e.RevocationID, e.RevokedBy)
	}
	if err := revocation.Append(d.RevocationList, e); err != nil {
		return RevokeResult{}, internalError("the revocation cannot be recorded: %v", err)
	}
	if d.Revocations != nil {
		if err := d.Revocations.Reload(); err != nil {
			return RevokeResult{}, internalError("the revocation list cannot be re-read: %v", err)
		}
	}
	res := RevokeResult{RevocationID: e.RevocationID}
	if target == nil || target.Status != chain.StatusActive {
		return res, nil
	}
	// Whatever its scope, the entry revokes every token containing the
	// block, so the delegation and its whole subtree are revoked.
	if changed, err := d.Chain.Revoke(target.Key, d.now()); err == nil {
		res.Delegations = d.ids(changed)
	}
	return res, nil
}

// ids names delegations given by key by their IDs, for people.
func (d *Delegations) ids(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k
		if del, err := d.Chain.Get(k); err == nil {
			out[i] = del.ID
		}
	}
	return out
}

// SpentUnder returns what store records as spent under the delegation a
// token ends with, keyed as the Gate keys it. It reads the token's fields
// without verifying them: use it on tokens a Verifier has accepted (such as
// those of recorded delegations).
func SpentUnder(store budget.Store, tok *dct.Token) int64 {
	return store.Spent(BudgetKey(tok))
}

// BudgetKey is the key the Gate records spend under the delegation a
// token ends with by (reading the token's fields unverified, as
// SpentUnder).
func BudgetKey(tok *dct.Token) string {
	t := tok.Unverified()
	links := []dct.ChainLink{{DelegationID: t.Authority.DelegationID}}
	for _, a := range t.Attenuations {
		links = append(links, dct.ChainLink{DelegationID: a.DelegationID})
	}
	levels := BudgetLevels(&dct.AuthorizedScope{Issuer: t.Authority.Issuer, Chain: links})
	return levels[len(levels)-1].Key
}
