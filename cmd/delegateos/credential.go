package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/credential"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/render"
	"github.com/delegateos/delegateos/reputation"
)

// credentialGroup issues and verifies W3C Verifiable Credentials.
var credentialGroup = &command{
	name:    "credential",
	summary: "issue and verify W3C Verifiable Credentials (Data Integrity, eddsa-jcs-2022, did:key)",
	subs:    []*command{credentialIssueCmd, credentialVerifyCmd},
}

// defaultValidity is how long an issued credential is valid by default.
const defaultValidity = 365 * 24 * time.Hour

var credentialIssueCmd = &command{
	name: "issue",
	args: "--key FILE --kind delegation|reputation [--workspace DIR] (--delegation DEL | --attestation ATT | --agent AGENT) " +
		"[--at TIME] [--valid-for DURATION] [--out FILE] [--json]",
	summary: "sign a DelegationReceipt for a completed or failed delegation, or a reputation credential of an agent's RDP scores",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		key := fs.String("key", "", "the issuer's key file; a delegation receipt's issuer is the delegator")
		kind := fs.String("kind", "", "delegation (a DelegationReceipt) or reputation (a ReputationCredential)")
		ws := fs.String("workspace", ".", "the workspace: its "+wsDelegations+", "+wsTaskContracts+"/ and "+wsAttestations+"/ for --kind delegation, its reputation/ for --kind reputation")
		del := fs.String("delegation", "", "--kind delegation: the delegation ID (del_...), recorded completed or failed in the workspace")
		att := fs.String("attestation", "", "--kind delegation: the attestation ID (att_...) that ended the delegation, instead of --delegation")
		agent := fs.String("agent", "", "--kind reputation: the agent, as a principal ID, a DID or a profile slug")
		at := fs.String("at", "", "when the credential is issued and valid from, RFC 3339 (default: now); the scores are read as of then")
		validFor := fs.Duration("valid-for", defaultValidity, "how long the credential is valid")
		out := fs.String("out", "", "write the credential to FILE instead of standard output")
		fs.Bool("json", true, "output is always JSON: the signed credential")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if *validFor <= 0 {
				return usagef("--valid-for must be positive")
			}
			when, err := atFlag(*at)
			if err != nil {
				return err
			}
			var issue func(*identity.Keypair, credential.Window) ([]byte, error)
			switch *kind {
			case "delegation":
				if (*del == "") == (*att == "") || *agent != "" {
					return usagef("--kind delegation takes --delegation DEL or --attestation ATT (and no --agent)")
				}
				issue = func(k *identity.Keypair, w credential.Window) ([]byte, error) {
					return issueReceipt(*ws, *del, *att, k, w)
				}
			case "reputation":
				if *agent == "" || *del != "" || *att != "" {
					return usagef("--kind reputation takes --agent AGENT (and no --delegation or --attestation)")
				}
				issue = func(k *identity.Keypair, w credential.Window) ([]byte, error) {
					return issueReputation(*ws, *agent, k, w)
				}
			default:
				return usagef("--kind must be delegation or reputation")
			}
			k, err := loadKey(*key)
			if err != nil {
				return err
			}
			if *at == "" && !when.Equal(when.Truncate(time.Second)) {
				// Now, rounded up to the second: what was recorded earlier
				// in this second is as of the credential's time.
				when = when.Add(time.Second)
			}
			when = when.Truncate(time.Second)
			b, err := issue(k, credential.Window{ValidFrom: when, ValidUntil: when.Add(*validFor)})
			if err != nil {
				return err
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, b, "", "  "); err != nil {
				return err
			}
			pretty.WriteByte('\n')
			return writeOut(e, *out, pretty.Bytes())
		}
	},
}

// receiptRecord picks the record a receipt is for among those with the ID:
// another delegation may have it too, since whoever attenuates chooses
// IDs. Of several, the one the attestation ended, then the one the key
// delegated; nil when none has the ID.
func receiptRecord(ds []chain.Delegation, id, attID, delegator string) (*chain.Delegation, error) {
	var all []*chain.Delegation
	for i := range ds {
		if ds[i].ID == id {
			all = append(all, &ds[i])
		}
	}
	for _, keep := range []func(d *chain.Delegation) bool{
		func(d *chain.Delegation) bool { return attID == "" || d.AttestationID == attID },
		func(d *chain.Delegation) bool { return d.From == delegator },
	} {
		if len(all) > 1 {
			if some := slices.DeleteFunc(slices.Clone(all), func(d *chain.Delegation) bool { return !keep(d) }); len(some) > 0 {
				all = some
			}
		}
	}
	switch len(all) {
	case 0:
		return nil, nil
	case 1:
		return all[0], nil
	}
	return nil, checkError{fmt.Sprintf("%d delegations %s delegated by this key are recorded (delegation IDs are chosen by whoever attenuates): name the one meant with --attestation", len(all), id)}
}

// issueReceipt gathers what a DelegationReceipt states from the
// workspace's chain, contract and attestation stores, and signs it. The
// delegation is given by its ID, or by the attestation that ended it.
func issueReceipt(ws, id, attID string, k *identity.Keypair, w credential.Window) ([]byte, error) {
	openAtts := func() (attest.Store, error) {
		return openExisting(filepath.Join(ws, wsAttestations), func(p string) (attest.Store, error) { return attest.OpenDir(p) })
	}
	if attID != "" {
		if !attest.ValidID(attID) {
			return nil, usagef("--attestation %q is not att_ and 12 lowercase hex digits", attID)
		}
		atts, err := openAtts()
		if err != nil {
			return nil, err
		}
		a, err := atts.Get(attID)
		if err != nil {
			return nil, checkError{fmt.Sprintf("attestation %s: %v", attID, err)}
		}
		id = a.DelegationID
	}
	if !chain.ValidDelegationID(id) {
		return nil, usagef("--delegation %q is not del_ and 12 lowercase hex digits", id)
	}
	path := filepath.Join(ws, wsDelegations)
	ds, err := chain.Load(path)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, inputf("%s does not exist: no delegation has been recorded in this workspace", path)
	}
	if err != nil {
		return nil, inputf("%v", err)
	}
	rec, err := receiptRecord(ds, id, attID, k.ID())
	if err != nil {
		return nil, err
	}
	switch {
	case rec == nil:
		return nil, checkError{fmt.Sprintf("delegation %s is not recorded in %s", id, path)}
	case rec.Status != chain.StatusCompleted && rec.Status != chain.StatusFailed:
		return nil, checkError{fmt.Sprintf("delegation %s is %s: a receipt is issued for a completed or failed delegation", id, rec.Status)}
	case rec.AttestationID == "":
		return nil, checkError{fmt.Sprintf("delegation %s ended without an attestation", id)}
	case attID != "" && rec.AttestationID != attID:
		return nil, checkError{fmt.Sprintf("delegation %s was ended by attestation %s, not %s", id, rec.AttestationID, attID)}
	}
	if err := verifyRecordToken(rec); err != nil {
		return nil, checkError{fmt.Sprintf("delegation %s: %v", id, err)}
	}
	contracts, err := openExisting(filepath.Join(ws, wsTaskContracts), func(p string) (contract.Store, error) { return contract.OpenDir(p) })
	if err != nil {
		return nil, err
	}
	c, err := contracts.Get(rec.ContractID)
	if err != nil {
		return nil, checkError{fmt.Sprintf("delegation %s: contract %s: %v", id, rec.ContractID, err)}
	}
	if c.Issuer != rec.From {
		return nil, checkError{fmt.Sprintf("delegation %s: contract %s is signed by %s, not by the delegator %s", id, c.ID, c.Issuer, rec.From)}
	}
	atts, err := openAtts()
	if err != nil {
		return nil, err
	}
	a, err := atts.Get(rec.AttestationID)
	if err != nil {
		return nil, checkError{fmt.Sprintf("delegation %s: attestation %s: %v", id, rec.AttestationID, err)}
	}
	if a.ContractID != rec.ContractID || a.DelegationID != rec.ID || a.Principal != rec.To {
		return nil, checkError{fmt.Sprintf("attestation %s is not the delegatee's for delegation %s under contract %s", a.ID, id, rec.ContractID)}
	}
	if a.Type != attest.Completion {
		return nil, checkError{fmt.Sprintf("attestation %s is a %s attestation, not the %s one that ends a delegation", a.ID, a.Type, attest.Completion)}
	}
	if rec.Status == chain.StatusCompleted && !a.Result.Success {
		// Only the proxy's verification of a successful attestation
		// completes a delegation; the log's word for it is not signed.
		return nil, checkError{fmt.Sprintf("delegation %s is recorded completed, but attestation %s reports no success", id, a.ID)}
	}
	if k.ID() != rec.From {
		return nil, checkError{fmt.Sprintf("--key is not the delegator of %s (%s): a delegation receipt is issued by the delegator", id, rec.From)}
	}
	from, err := identity.DIDFromPrincipalID(rec.From)
	if err != nil {
		return nil, inputf("delegation %s: from: %v", id, err)
	}
	to, err := identity.DIDFromPrincipalID(rec.To)
	if err != nil {
		return nil, inputf("delegation %s: to: %v", id, err)
	}
	completed, err := time.Parse(time.RFC3339Nano, rec.CompletedAt)
	if err != nil {
		return nil, inputf("delegation %s: completedAt: %v", id, err)
	}
	d := credential.DelegationReceipt{
		Delegator: from, Delegatee: to, DelegationID: rec.ID, ContractID: rec.ContractID, AttestationID: a.ID,
		Purpose: c.Task.Title, Categories: c.Constraints.RequiredCapabilities,
		BudgetMicrocents: c.Constraints.MaxBudgetMicrocents, CostMicrocents: a.Result.CostMicrocents,
		Outcome: string(rec.Status), CompletedAt: completed,
	}
	if o := a.Result.VerificationOutcome; o != nil {
		d.VerificationPassed, d.VerificationScore = &o.Passed, o.Score
	}
	b, err := credential.IssueDelegationReceipt(k.PrivateKey(), d, w, nil)
	if err != nil {
		return nil, inputf("%v", err)
	}
	return b, nil
}

// verifyRecordToken checks the signatures of a recorded delegation's token
// and its chain, as of when the delegation was recorded: the chain log
// holds tokens unverified, and a receipt vouches that the delegator
// delegated.
func verifyRecordToken(rec *chain.Delegation) error {
	tok, err := dct.ParseSerialized(rec.DCT)
	if err != nil {
		return fmt.Errorf("token: %v", err)
	}
	v, err := dct.NewVerifier(dct.Options{Roots: tok.Signers()[:1], CacheSize: -1})
	if err != nil {
		return fmt.Errorf("token: %v", err)
	}
	created, err := time.Parse(time.RFC3339Nano, rec.CreatedAt)
	if err != nil {
		return fmt.Errorf("createdAt: %v", err)
	}
	if _, err := v.VerifyChain(rec.DCT.Token, created); err != nil {
		return fmt.Errorf("token: %v", err)
	}
	return nil
}

// issueReputation signs a credential of an agent's scores in the RDP
// workspace, as read at the window's start.
func issueReputation(ws, agent string, k *identity.Keypair, w credential.Window) ([]byte, error) {
	rw, err := openWorkspace(ws)
	if err != nil {
		return nil, err
	}
	p, err := rw.Profile(agent)
	if errors.Is(err, reputation.ErrNotFound) {
		return nil, checkError{fmt.Sprintf("%s has no profile in %s: an unknown agent has no scores to attest", render.Printable(agent), ws)}
	}
	if err != nil {
		return nil, repError(err)
	}
	at := w.ValidFrom
	rep := credential.Reputation{Agent: p.AgentDID, AgentName: p.AgentName, Profile: p.ID(), At: at}
	for _, name := range p.DimensionNames() {
		if v := p.Score(name, at); v.Known {
			rep.Dimensions = append(rep.Dimensions, credential.Score{Name: name, Score: v.Score, Confidence: v.Confidence, SampleSize: v.SampleSize, LastSignal: v.LastSignal})
		}
	}
	for _, name := range p.DomainNames() {
		if v := p.DomainScore(name, at); v.Known {
			rep.Domains = append(rep.Domains, credential.Score{Name: name, Score: v.Score, Confidence: v.Confidence, SampleSize: v.SampleSize, LastSignal: v.LastSignal})
		}
	}
	if len(rep.Dimensions)+len(rep.Domains) == 0 {
		return nil, checkError{fmt.Sprintf("%s has no score as of %s", render.Printable(agent), credential.FormatTime(at))}
	}
	b, err := credential.IssueReputation(k.PrivateKey(), rep, w, nil)
	if err != nil {
		return nil, inputf("%v", err)
	}
	return b, nil
}

var credentialVerifyCmd = &command{
	name:    "verify",
	args:    "FILE [--at TIME] [--signer DID] [--avp-legacy] [--json]",
	summary: "verify an eddsa-jcs-2022 credential signed by a did:key: each check it passed, or the one that failed (exit 1)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		at := fs.String("at", "", "judge the validity window and the proof's expiry at this RFC 3339 time (default: now)")
		signer := fs.String("signer", "", "the did:key (or principal ID) that must have signed; default: any did:key")
		legacy := fs.Bool("avp-legacy", false, "also accept AVP's legacy proofs (Ed25519 over the document alone, no proofPurpose), which are not eddsa-jcs-2022")
		asJSON := fs.Bool("json", false, "print the result as JSON")
		return func(e *env, args []string) error {
			if len(args) != 1 {
				return usagef("give one credential FILE (- for standard input)")
			}
			opts := credential.VerifyOptions{AllowAVPLegacy: *legacy}
			if *at != "" {
				t, err := parseTime("--at", *at)
				if err != nil {
					return err
				}
				opts.Now = t
			}
			if *signer != "" {
				pub, err := identity.ParsePrincipal(*signer)
				if err != nil {
					return usagef("--signer: %v (give a did:key or a principal ID)", err)
				}
				opts.Signer = identity.DIDFromPublicKey(pub)
			}
			b, err := readCredential(e, args[0])
			if err != nil {
				return err
			}
			r, verr := credential.Verify(b, opts)
			if *asJSON {
				out := struct {
					Verified bool `json:"verified"`
					*credential.Result
					Failed *failedCheck `json:"failed,omitempty"`
				}{Verified: verr == nil, Result: r}
				if out.Result == nil {
					out.Result = &credential.Result{Checks: []credential.Check{}}
				}
				if verr != nil {
					out.Failed = newFailedCheck(verr)
				}
				if err := writeJSON(e, out); err != nil {
					return err
				}
			} else {
				writeCredentialReport(e, r, verr)
			}
			if verr != nil {
				return checkError{"not verified: " + verr.Error()}
			}
			return nil
		}
	},
}

// failedCheck is the failed check in --json output.
type failedCheck struct {
	Check  string `json:"check"`
	Reason string `json:"reason"`
}

func newFailedCheck(err error) *failedCheck {
	var ce *credential.Error
	if errors.As(err, &ce) {
		return &failedCheck{Check: ce.Check, Reason: ce.Err.Error()}
	}
	return &failedCheck{Check: "credential", Reason: err.Error()}
}

// readCredential reads FILE, or standard input for "-", up to one byte
// more than a credential may have, so that Verify names the size.
func readCredential(e *env, arg string) ([]byte, error) {
	var r io.Reader = e.stdin
	if arg != "-" {
		f, err := os.Open(arg)
		if err != nil {
			return nil, inputf("%v", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, credential.MaxSize+1))
	if err != nil {
		return nil, inputf("read %s: %v", arg, err)
	}
	return b, nil
}

// writeCredentialReport prints what was checked, then VERIFIED or the
// failed check. Every string from the credential is made printable.
func writeCredentialReport(e *env, r *credential.Result, verr error) {
	if r != nil {
		id := r.ID
		if id == "" {
			id = "(no id)"
		}
		fmt.Fprintf(e.stdout, "credential %s\n", render.Printable(id))
		if len(r.Types) > 0 {
			types := make([]string, len(r.Types))
			for i, t := range r.Types {
				types[i] = render.Printable(t)
			}
			fmt.Fprintf(e.stdout, "  type    %s\n", strings.Join(types, ", "))
		}
		if r.Issuer != "" {
			fmt.Fprintf(e.stdout, "  issuer  %s\n", render.Printable(r.Issuer))
		}
		if r.Signer != "" {
			fmt.Fprintf(e.stdout, "  signer  %s\n", r.Signer)
		}
		if r.Digest != "" {
			fmt.Fprintf(e.stdout, "  digest  sha256:%s (RFC 8785 form, proof included)\n", r.Digest)
		}
		for _, c := range r.Checks {
			fmt.Fprintf(e.stdout, "  ok      %-18s %s\n", c.Name, render.Printable(c.Detail))
		}
	}
	if verr != nil {
		f := newFailedCheck(verr)
		fmt.Fprintf(e.stdout, "  FAILED  %-18s %s\nNOT VERIFIED\n", f.Check, render.Printable(f.Reason))
		return
	}
	fmt.Fprintln(e.stdout, "VERIFIED")
}
