package ldpfront

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/ldp"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/reputation"
	"github.com/delegateos/delegateos/serve"
	"github.com/delegateos/delegateos/verify"
)

// Options are what a Front is built from.
type Options struct {
	// Policy is the server's policy; its LDP section must be set.
	Policy *policy.Policy
	// Key is the server's key: it signs the replies, and its did:key is on
	// the card.
	Key *identity.Keypair
	// MCP serves the MCP endpoint at Endpoint (serve.Server's Mux): each
	// task is a request to it.
	MCP      http.Handler
	Endpoint string
	// Guard is serve's Host and Origin check (serve.Server.Guard).
	Guard func(http.Handler) http.Handler
	// TLS says the server serves HTTPS (for the card's endpoint).
	TLS bool
	// CheckToken verifies a token and that its delegation has not ended;
	// a task's token is checked with it before its call, so that one the
	// endpoint would refuse is the task's denial.
	CheckToken func(string) error
	// Gates is the gate in force (a reload swaps it): what a call costs,
	// in provenance and on the card, is its policy's; nil means Policy's.
	Gates *gate.Current
	// ReadBody reads an envelope's body within the server's budget of
	// bodies in flight (serve.Server.ReadBody); nil means the Handler's
	// own bounded read.
	ReadBody func(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, func(), error)
	// Receipts, when the server keeps an audit log, is the Tap its relays
	// hand their receipts through: each task's provenance names the
	// receipts of its call. Nil means no audit log.
	Receipts *Tap
	// RequireSignature says the server requires holder-of-key signatures
	// (require_signature): a task not signed by its token's holder with
	// Ed25519 is then refused by the endpoint, as an MCP client's
	// unsigned request is, rather than by the front.
	RequireSignature bool
	// Log is the server's logger; nil means none.
	Log *zap.Logger
}

// Front is the LDP front of a server.
type Front struct {
	handler http.Handler
	// card is the identity card in force: rebuilt by Refresh when a
	// reload swaps the policy (its costs, the quality hints read again).
	card atomic.Pointer[ldp.IdentityCard]
	key  *identity.Keypair
	ldp  *policy.LDPConfig
}

// SettingError is a setting of the ldp section that cannot work (the
// message says what to change).
type SettingError struct{ Msg string }

func (e *SettingError) Error() string { return e.Msg }

// New builds the front the policy's ldp section describes. It reads the
// hmac_secret_file and opens the workspace the policy names.
func New(o Options) (*Front, error) {
	c := o.Policy.LDP
	if c == nil {
		return nil, &SettingError{"the policy has no ldp section"}
	}
	if o.Key == nil {
		return nil, &SettingError{"the policy's ldp section needs the server's key (--key or proxy_key): it signs every LDP reply, and its did:key is on the identity card"}
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	secret := c.HMACSecret
	if c.HMACSecretFile != "" {
		b, err := os.ReadFile(c.HMACSecretFile)
		if err != nil {
			return nil, fmt.Errorf("ldp.hmac_secret_file: %w", err)
		}
		if secret = strings.TrimRight(string(b), "\r\n"); len(secret) < 16 {
			return nil, &SettingError{fmt.Sprintf("ldp.hmac_secret_file %s holds fewer than 16 characters: write a longer secret", c.HMACSecretFile)}
		}
	}
	f := &Front{key: o.Key, ldp: c}
	var appr *approvals
	if len(c.Approvers) > 0 {
		appr = &approvals{approvers: c.Approvers, now: time.Now}
	}
	card := Card(o.Policy, o.Key)
	f.card.Store(card)
	exec := &ldpExec{cfg: c, pol: o.Policy, mux: o.MCP, endpoint: o.Endpoint, log: o.Log, contracts: map[string]*contract.TaskContract{},
		check: o.CheckToken, gates: o.Gates, tap: o.Receipts, requireSig: o.RequireSignature, approvals: appr}
	for _, sk := range c.Skills {
		if sk.Contract == "" {
			continue
		}
		b, err := os.ReadFile(sk.Contract)
		if err != nil {
			return nil, fmt.Errorf("ldp skill %s: contract: %w", sk.Name, err)
		}
		tc, err := contract.Parse(b)
		if err == nil {
			err = tc.Verify()
		}
		if err == nil {
			_, err = tc.Spec()
		}
		if err != nil {
			return nil, &SettingError{fmt.Sprintf("ldp skill %s: the contract %s cannot be used: %v", sk.Name, sk.Contract, err)}
		}
		exec.contracts[sk.Name] = tc
	}
	exec.verifier = &verify.Verifier{Warn: func(msg string) { o.Log.Warn(msg) }}
	if j := o.Policy.Judge; len(j.Command) > 0 {
		exec.verifier.Judge = &verify.CommandJudge{Command: j.Command, Timeout: j.Timeout}
	}
	var run ldp.Executor = exec
	var atts ldp.TaskAttestationStore
	if o.Policy.Workspace != "" {
		w, err := reputation.Open(o.Policy.Workspace)
		if err != nil {
			return nil, err
		}
		run = &ldpAttestingExec{ldpExec: exec, w: w, did: o.Key.DID()}
		// Each result's signed attestation is kept next to the
		// workspace's DelegateOS attestations, one file per ID.
		if atts, err = ldp.OpenTaskAttestationDir(filepath.Join(o.Policy.Workspace, AttestationsDir)); err != nil {
			return nil, err
		}
	}
	r := &ldp.Responder{Card: card, Cards: f.card.Load, Key: o.Key.PrivateKey(), Exec: run, Attestations: atts,
		Verifier:     &ldp.Verifier{HMACSecret: secret, RequireEd25519: c.RequireEd25519},
		AdmitSession: admitLDPSession(o.Policy.AllowUnauthenticated, o.CheckToken), Tree: tokenTree}
	scheme := "http"
	if o.TLS {
		scheme = "https"
	}
	guard := o.Guard
	if guard == nil {
		guard = func(h http.Handler) http.Handler { return h }
	}
	// Envelopes are read within serve's budget of bodies in flight, as
	// bodies without a credential (the envelope, not the request, says
	// who sends it): a stranger's cannot hold the server's memory past it.
	var readBody func(http.ResponseWriter, *http.Request) ([]byte, func(), error)
	if o.ReadBody != nil {
		readBody = func(w http.ResponseWriter, req *http.Request) ([]byte, func(), error) {
			return o.ReadBody(w, req, ldp.MaxEnvelopeSize)
		}
	}
	h := guard(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if (req.URL.Path == ldp.WellKnownPath || req.URL.Path == ldp.IdentityPath) && (req.Method == http.MethodGet || req.Method == http.MethodHead) {
			// A copy with the latencies measured so far, whose endpoint is
			// where this request (past the Host check) reached the server:
			// each reader sees the address it used, and no request sets it
			// for the others; what the skills need and cost is what the
			// policy in force says (a reload may change them).
			c := exec.latencies.card(f.card.Load())
			c.Endpoint = scheme + "://" + req.Host
			c.Metadata = maps.Clone(c.Metadata)
			skillMetadata(c.Metadata, exec.cfg, exec.policy())
			b, err := json.Marshal(c)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write(b)
			return
		}
		if req.URL.Path == ApprovalsPath {
			if appr == nil {
				http.Error(w, "this delegate names no approvers (ldp.approvers): no task waits for approval", http.StatusNotFound)
				return
			}
			// An approval (at most 4 KiB, less than the connection's own
			// buffers) is read outside the budget of bodies in flight,
			// whose anonymous share requests of anyone may fill: an
			// approver is heard however many bodies are in flight.
			appr.serve(nil).ServeHTTP(w, req)
			return
		}
		(&ldp.Handler{Responder: r, ReadBody: readBody}).ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), hostKey{}, req.Host)))
	}))
	o.Log.Info("serving LDP", zap.String("delegate", c.DelegateID), zap.String("did", card.Metadata[ldp.MetaDID]), zap.Int("skills", len(c.Skills)))
	f.handler = h
	return f, nil
}

// Refresh makes the card follow pol, the policy a reload swapped in: the
// skills' capabilities and costs it maps, and the quality hints its
// workspace holds now. The ldp section is the one the front started with
// (a reload that changes it is refused).
func (f *Front) Refresh(pol *policy.Policy) {
	p := *pol
	p.LDP = f.ldp
	f.card.Store(Card(&p, f.key))
}

// AttestationsDir is the directory of a workspace that holds the task
// attestations of an LDP delegate's results (ldp.TaskAttestation), next
// to the DelegateOS attestations of attestations/.
const AttestationsDir = "ldp-attestations"

// Paths are the paths a Front serves.
var Paths = []string{ldp.WellKnownPath, ldp.IdentityPath, ldp.MessagesPath, ldp.StreamPath, ApprovalsPath}

// Mount serves the front's Paths on mux.
func (f *Front) Mount(mux *http.ServeMux) {
	for _, p := range Paths {
		mux.Handle(p, f.handler)
	}
}

type hostKey struct{}

// admitLDPSession opens a session only for the holder of a token the gate
// accepts (as a SESSION_PROPOSE's delegateos member or the request's
// bearer token), unless the policy allows calls without one: sessions are
// server state, which no stranger's key may fill.
func admitLDPSession(allowUnauthenticated bool, check func(string) error) func(context.Context, *ldp.Envelope, ldp.Verified, *ldp.DelegateOSMember) *ldp.LdpError {
	return func(_ context.Context, _ *ldp.Envelope, by ldp.Verified, tok *ldp.DelegateOSMember) *ldp.LdpError {
		refuse := func(code, msg string) *ldp.LdpError {
			return &ldp.LdpError{Code: code, Category: category(code), Severity: "fatal", Message: msg}
		}
		if tok == nil {
			if allowUnauthenticated {
				return nil
			}
			return refuse("token_required", "a session needs a delegation token: send it as the SESSION_PROPOSE's delegateos member or as Authorization: Bearer")
		}
		if err := check(tok.DCT); err != nil {
			return refuse("invalid_token", err.Error())
		}
		parsed, err := dct.Parse(tok.DCT)
		if err != nil {
			return refuse("malformed_token", err.Error())
		}
		signer, err := identity.PrincipalIDFromDID(by.Signer)
		if by.Algorithm != ldp.AlgEd25519 || err != nil || signer != parsed.Delegatee() {
			return &ldp.LdpError{Code: string(ldp.ReasonWrongKey), Category: ldp.CategorySecurity, Severity: "fatal",
				Message: "the SESSION_PROPOSE must be signed with ed25519 by the token's holder " + parsed.Delegatee()}
		}
		return nil
	}
}

// tokenTree is the delegation tree of a task's or session's token: its
// root delegation ID, which its holders cannot multiply as they can keys
// (as AVP-Sig counts nonces per tree); "" when it does not parse.
func tokenTree(tok *ldp.DelegateOSMember) string {
	t, err := dct.Parse(tok.DCT)
	if err != nil {
		return ""
	}
	return t.Unverified().Authority.DelegationID
}

// Labels are the §9.1 ldp.* labels of the A2A agent card of a server
// that is an LDP delegate; nil for one that is not.
func Labels(pol *policy.Policy, k *identity.Keypair) map[string]string {
	if pol.LDP == nil || k == nil {
		return nil
	}
	return Card(pol, k).Labels()
}

// Card is the identity card of the policy's ldp section: each skill a
// capability, with what the policy says it needs and costs in metadata,
// its quality hint from the server's own RDP profile in the policy's
// workspace. Its endpoint is a placeholder until a request reaches the
// front.
func Card(pol *policy.Policy, k *identity.Keypair) *ldp.IdentityCard {
	c := pol.LDP
	card := &ldp.IdentityCard{
		DelegateID: c.DelegateID, Name: c.Name, Description: c.Description, ModelFamily: c.ModelFamily,
		ModelVersion: c.ModelVersion, ContextWindow: uint64(c.ContextWindow),
		WeightsFingerprint: c.WeightsFingerprint, ReasoningProfile: c.ReasoningProfile, CostProfile: c.CostProfile,
		LatencyProfile: c.LatencyProfile, Jurisdiction: c.Jurisdiction,
		TrustDomain: ldp.TrustDomain{Name: c.TrustDomain.Name, AllowCrossDomain: c.TrustDomain.AllowCrossDomain, TrustedPeers: c.TrustDomain.TrustedPeers},
		Endpoint:    "http://127.0.0.1",
		Metadata:    map[string]string{ldp.MetaDID: k.DID()},
	}
	for _, m := range c.PayloadModes {
		card.SupportedPayloadModes = append(card.SupportedPayloadModes, ldp.PayloadMode(m))
	}
	var profile *reputation.Profile
	if pol.Workspace != "" {
		if w, err := reputation.Open(pol.Workspace); err == nil {
			profile, _ = w.Profile(k.DID())
		}
	}
	for _, sk := range c.Skills {
		cp := ldp.Capability{Name: sk.Name}
		card.Metadata[ldp.MetaQualityPrefix+sk.Name] = "none"
		if profile != nil {
			// The delegate's own RDP profile in the skill's domain, as
			// the workspace holds it: not a claim it makes up.
			if v := profile.DomainScore(sk.Name, time.Now()); v.Known {
				q := v.Score
				cp.QualityHint = &q
				card.Metadata[ldp.MetaQualityPrefix+sk.Name] = fmt.Sprintf("rdp (confidence %.2f, %d signals)", v.Confidence, v.SampleSize)
			}
		}
		card.Capabilities = append(card.Capabilities, cp)
	}
	skillMetadata(card.Metadata, c, pol)
	return card
}

// skillMetadata sets in m what each skill's call needs (its capability)
// and costs, as pol maps it.
func skillMetadata(m map[string]string, c *policy.LDPConfig, pol *policy.Policy) {
	for _, sk := range c.Skills {
		args := sk.Arguments
		if args == nil {
			args = json.RawMessage(`{}`)
		}
		if call, err := pol.Map(sk.Tool, args); err == nil {
			m[ldp.MetaCapabilityPrefix+sk.Name] = call.Namespace + ":" + call.Action + ":" + call.Resource
			m[ldp.MetaCostPrefix+sk.Name] = strconv.FormatInt(call.Cost, 10)
		} else {
			delete(m, ldp.MetaCapabilityPrefix+sk.Name)
			delete(m, ldp.MetaCostPrefix+sk.Name)
		}
	}
}

// ldpExec runs a task as a tools/call through serve's own MCP endpoint,
// in the stateless style (one request, the task's token as its bearer).
type ldpExec struct {
	latencies latencies
	// contracts are the skills' task contracts, run by verifier.
	contracts map[string]*contract.TaskContract
	verifier  *verify.Verifier
	cfg       *policy.LDPConfig
	pol       *policy.Policy
	mux       http.Handler
	endpoint  string
	log       *zap.Logger
	// seq numbers the calls: tasks under one token share its stateless
	// session, where two requests in flight may not have the same id (nor
	// may a task and a client of the session's credential, the anonymous
	// one included: ids also carry a random part no client guesses).
	seq atomic.Int64
	// check verifies a task's token as serve's endpoint does before it
	// takes a request (nil: not checked here).
	check func(string) error
	// gates is the gate in force, whose policy says what a call costs;
	// nil means pol's.
	gates *gate.Current
	// tap notes the receipts of the tasks' calls; nil without an audit
	// log.
	tap *Tap
	// requireSig: the endpoint requires holder-of-key signatures.
	requireSig bool
	// approvals, when the policy names approvers, holds the tasks a rule
	// holds for approval; nil refuses them.
	approvals *approvals
}

// policy is the policy in force: what the gate charges by.
func (x *ldpExec) policy() *policy.Policy {
	if x.gates != nil {
		if snap := x.gates.Load(); snap != nil && snap.Policy != nil {
			return snap.Policy
		}
	}
	return x.pol
}

// awaitApproval holds a task the gate asked approval for until one of the
// policy's approvers answers (true: approved), the approval expires, or
// the task ends (cancelled, its request gone). The task's initiator is
// told the approval's ID and what it is for (TASK_UPDATE on a stream), as
// is the server's log, where the operator finds it.
func (x *ldpExec) awaitApproval(ctx context.Context, t *ldp.Task, holder, msg string, expires time.Time) (bool, error) {
	var initiators []string
	if holder != "" {
		initiators = append(initiators, holder)
	}
	if t.By.Algorithm == ldp.AlgEd25519 {
		if p, err := identity.PrincipalIDFromDID(t.By.Signer); err == nil {
			initiators = append(initiators, p)
		}
	}
	id, w, ok := x.approvals.add(t.Session.ID, t.Tree, initiators)
	if !ok {
		return false, denied("approval_unavailable", fmt.Sprintf("%s: approval_unavailable — %d tasks (or %d of this delegation tree's) are already waiting for an approver", gate.DenialMessage, maxWaiting, maxWaitingPerTree))
	}
	defer x.approvals.remove(id)
	// The envelope's body was read within the server's budget of bodies
	// in flight: a task waiting (minutes) must not hold that share, or a
	// few of them would keep every other peer, the approvers included,
	// from being heard.
	ldp.ReleaseBody(ctx)
	x.log.Info("LDP task awaits approval", zap.String("approval_id", id), zap.String("task", t.Submit.TaskID),
		zap.String("initiator", t.Envelope.From), zap.String("request", msg), zap.Time("expires", expires))
	t.Update(nil, "awaiting approval "+id+" by one of this delegate's approvers (delegateos ldp approve): "+msg)
	if c := t.Submit.Contract; c != nil && c.Deadline != "" {
		// Past the contract's deadline an answer is of no use: the wait
		// ends then, and the task is refused (Recheck).
		if d, err := timestamp.Parse(c.Deadline); err == nil && (expires.IsZero() || d.Before(expires)) {
			expires = d
		}
	}
	var timeout <-chan time.Time
	if !expires.IsZero() {
		tm := time.NewTimer(time.Until(expires))
		defer tm.Stop()
		timeout = tm.C
	}
	select {
	case ap := <-w.answer:
		x.log.Info("LDP approval answered", zap.String("approval_id", id), zap.Bool("approved", ap.Approve), zap.String("approver", ap.Approver))
		if err := ctx.Err(); err != nil {
			// Answered as the task ended (its session closed): it
			// does not run.
			return false, err
		}
		return ap.Approve, nil
	case <-timeout:
		// The relay's record of the request has expired: sent back, it
		// is refused as unanswered (approval_declined) and recorded so.
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// EndSession drops the approvals the tasks of a closed (or expired)
// session wait for, before the close is acknowledged: an approver's answer
// after it finds nothing to approve, and the tasks end cancelled.
func (x *ldpExec) EndSession(sid string) {
	if x.approvals != nil {
		x.approvals.endSession(sid)
	}
}

// Quote is what a task will be charged, as the policy in force maps its
// call: unknown when the tool's arguments cannot be made from its input or
// the policy honours upstream-reported costs (which this front learns only
// afterwards).
func (x *ldpExec) Quote(t *ldp.Task) (int64, bool) {
	sk := x.cfg.Skill(t.Submit.Skill)
	if sk == nil {
		return 0, false
	}
	args, err := toolArguments(sk, t)
	if err != nil {
		return 0, false
	}
	raw, err := json.Marshal(args)
	pol := x.policy()
	if err != nil || pol.HonourUpstreamCost {
		return 0, false
	}
	call, err := pol.Map(sk.Tool, raw)
	if err != nil {
		return 0, false
	}
	return call.Cost, true
}

// tokenRefused is the TASK_FAILED of a task whose token does not verify:
// its denial type (invalid_token when it has none) and the message serve's
// endpoint answers an MCP client with.
func tokenRefused(err error) error {
	code := "invalid_token"
	var d *dct.Denial
	if errors.As(err, &d) {
		code = string(d.Type)
	}
	return &ldp.TaskError{LdpError: ldp.LdpError{Code: code, Category: category(code), Severity: "error",
		Message: "the token in the Authorization header is not valid: " + err.Error()}}
}

// category is the category of a failure code (ldp.CodeCategory, the
// table of docs/ldp.md); a denial type the table does not know yet is a
// policy refusal.
func category(code string) string {
	if c, ok := ldp.CodeCategory(code); ok {
		return c
	}
	return ldp.CategoryPolicy
}

// retryable says whether the same task may pass later unchanged: a rate
// limit's window, a dependency, a store that did not answer.
func retryable(code string) bool {
	switch code {
	case "rate_limited", "dependency_pending", "store_unavailable":
		return true
	}
	return false
}

// denied is the TASK_FAILED of a refusal with code, in its category.
func denied(code, msg string) error {
	return taskError(code, category(code), msg)
}

func taskError(code, category, msg string) error {
	return &ldp.TaskError{LdpError: ldp.LdpError{Code: code, Category: category, Severity: "error", Message: msg}}
}

func (x *ldpExec) Execute(ctx context.Context, t *ldp.Task) (*ldp.Outcome, error) {
	sk := x.cfg.Skill(t.Submit.Skill)
	if sk == nil {
		return nil, denied(ldp.CodeSkillUnknown, "no such skill")
	}
	bearer, delegation, holder := "", "", ""
	if t.Token != nil {
		if t.Token.Format != "" && t.Token.Format != dct.Format {
			return nil, denied("malformed_token", fmt.Sprintf("token format %q is not %s", t.Token.Format, dct.Format))
		}
		tok, err := dct.Parse(t.Token.DCT)
		if err != nil {
			return nil, denied("malformed_token", err.Error())
		}
		// The TASK_SUBMIT's signer must hold the token, as an AVP-Sig
		// signer must: the shared secret proves no holder.
		switch {
		case t.By.Algorithm == ldp.AlgEd25519:
			signer, err := identity.PrincipalIDFromDID(t.By.Signer)
			if err != nil || signer != tok.Delegatee() {
				return nil, denied(string(ldp.ReasonWrongKey), fmt.Sprintf("the TASK_SUBMIT is signed by %s, not by the token's holder %s", t.By.Signer, tok.Delegatee()))
			}
			// The envelope, signed over all of it by the holder's key,
			// fresh, spent once and addressed to this delegate in a
			// session it opened, proves the key as an AVP-Sig would: a
			// server that requires signatures takes the call under this
			// token.
			ctx = serve.HolderProven(ctx, t.Token.DCT)
		case !x.requireSig:
			return nil, denied(string(ldp.ReasonWrongKey), "a task under a token must be signed with ed25519 by the token's holder; an hmac-sha256 envelope shows no holder")
		}
		// Under require_signature a task without that proof goes on
		// unproven: the endpoint refuses it as it refuses an MCP client's
		// unsigned request, with the same denial.
		bearer, holder = t.Token.DCT, tok.Delegatee()
		st := tok.Unverified()
		// The chain's principals, for the self-dealing rule of ATTESTATION:
		// the root issuer and every holder (each attenuator held it).
		t.Principals = []string{st.Authority.Issuer, st.Authority.Delegatee}
		for _, a := range st.Attenuations {
			t.Principals = append(t.Principals, a.Delegatee)
		}
		delegation = st.Authority.DelegationID
		if n := len(st.Attenuations); n > 0 {
			delegation = st.Attenuations[n-1].DelegationID
		}
		// A token serve's endpoint would refuse (revoked, expired, not
		// from a trusted root) is the task's denial, as an MCP client is
		// told, not a runtime failure of the delegate.
		if x.check != nil {
			if err := x.check(bearer); err != nil {
				return nil, tokenRefused(err)
			}
		}
	}
	args, err := toolArguments(sk, t)
	if err != nil {
		return nil, denied(ldp.CodeInputInvalid, err.Error())
	}
	call := map[string]any{"name": sk.Tool, "arguments": args}
	if c := t.Submit.Contract; c != nil && c.Policy.Budget != nil && c.Policy.Budget.MaxCostUSD != nil {
		// The contract's budget bounds what the gate may reserve, at its
		// decision: a reload between the quote the task was admitted
		// with and the decision cannot overrun it.
		call["_delegateos"] = map[string]any{"maxCostMicrocents": ldp.BudgetMicrocents(*c.Policy.Budget.MaxCostUSD)}
	}
	if x.approvals != nil {
		// Asked as a client that takes form elicitation: a call a rule
		// holds for approval comes back input_required, for an approver.
		call["_meta"] = clientMeta
	}
	var rc *taskReceipts
	// quoted is what the call costs under the policy in force when it was
	// last sent, which the gate decides it with (a reload may come
	// later, while the tool runs): the cost charged, unless the audit
	// log's execution receipt says what was.
	var quoted int64
	var quotedOK bool
	// send makes the task's call (params, as the relay reads them)
	// through the MCP endpoint, watched by the tap.
	send := func(params map[string]any) (*captureWriter, string, time.Duration, error) {
		var nonce [8]byte
		rand.Read(nonce[:])
		id := "ldp-" + strconv.FormatInt(x.seq.Add(1), 10) + "-" + hex.EncodeToString(nonce[:])
		rawID, _ := json.Marshal(id)
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
		req, err := http.NewRequestWithContext(serve.FromLDPFront(ctx), http.MethodPost, x.endpoint, bytes.NewReader(body))
		if err != nil {
			return nil, "", 0, err
		}
		if h, ok := ctx.Value(hostKey{}).(string); ok {
			req.Host = h
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(serve.HeaderProtocolVersion, "2026-07-28")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		if x.tap != nil {
			if rc != nil {
				x.tap.forget(rc) // the call asked for approval, sent again
			}
			rc = x.tap.watch(body)
		}
		w := &captureWriter{header: http.Header{}}
		quoted, quotedOK = x.Quote(t)
		start := time.Now()
		x.mux.ServeHTTP(w, req)
		return w, string(rawID), time.Since(start), nil
	}
	defer func() {
		if rc != nil {
			x.tap.forget(rc)
		}
	}()
	// receipts is the provenance member naming the call's receipts (the
	// decision's, then the execution's), once written.
	receipts := func(p *ldp.ProvenanceDOS) *ldp.ProvenanceDOS { return x.tap.provenance(rc, p) }
	w, rawID, took, err := send(call)
	if err != nil {
		return nil, err
	}
	if resp, err := jsonrpcResponse(w, rawID); err == nil && resp.Error == nil && x.approvals != nil {
		if state, msg, expires, ok := inputRequired(resp.Result); ok {
			// Held for approval: the task waits for an approver's answer,
			// then goes back with it (the relay decides it afresh).
			answer, err := x.awaitApproval(ctx, t, holder, msg, expires)
			if err != nil {
				return nil, err
			}
			// The token may have been revoked (or have expired) during
			// the wait: that is the task's denial, as before the call.
			if x.check != nil && bearer != "" {
				if err := x.check(bearer); err != nil {
					return nil, tokenRefused(err)
				}
			}
			// So may the contract's terms: its deadline passed, or a
			// reload made the call cost more than its budget. The call
			// then goes back declined (the relay records it so) and the
			// task is refused as it would have been when submitted.
			terms := t.Recheck()
			retry := maps.Clone(call)
			retry["requestState"] = state
			action := map[string]any{"action": "decline"}
			if answer && terms == nil {
				action = map[string]any{"action": "accept", "content": map[string]any{"approve": true}}
			}
			retry["inputResponses"] = map[string]any{approvalInputKey: action}
			if w, rawID, took, err = send(retry); err != nil {
				return nil, err
			}
			if terms != nil {
				return nil, &ldp.TaskError{LdpError: *terms, DelegateOS: receipts(nil)}
			}
		}
	}
	if w.status == http.StatusUnauthorized || w.status == http.StatusForbidden || w.status == http.StatusServiceUnavailable {
		// The request was refused before the call: a required signature
		// missing (reason first, as avpsig words it), or the token
		// refused between the check above and the call. A denial, not
		// the delegate's failure.
		var m struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		json.Unmarshal(w.body.Bytes(), &m)
		code := "invalid_token"
		if reason, _, ok := strings.Cut(m.Error.Message, ": "); ok && strings.HasPrefix(reason, "signature_") && !strings.ContainsAny(reason, " \t") {
			code = reason
		}
		return nil, &ldp.TaskError{LdpError: ldp.LdpError{Code: code, Category: category(code), Severity: "error", Message: m.Error.Message,
			Retryable: w.status == http.StatusServiceUnavailable}}
	}
	resp, err := jsonrpcResponse(w, string(rawID))
	if err != nil {
		return nil, denied(ldp.CodeTaskFailed, err.Error())
	}
	if resp.Error == nil {
		// Only calls the tool answered are the skill's latency: a
		// refusal takes a fraction of a millisecond, and anyone with a
		// token could send them to set the card's hint.
		x.latencies.add(sk.Name, took)
	}
	if resp.Error != nil {
		var d struct {
			Type string `json:"type"`
		}
		json.Unmarshal(resp.Error.Data, &d)
		if resp.Error.Code == gate.DenialCode && d.Type != "" && x.tap.gateAllowed(rc) {
			// Shaped as the gate's denial, but the gate allowed the call:
			// the upstream answered so. The tool's failure, not a refusal.
			return nil, &ldp.TaskError{LdpError: ldp.LdpError{Code: "TOOL_ERROR", Category: ldp.CategoryRuntime, Severity: "error",
				Message: "the tool ran and failed (its error is shaped as a DelegateOS denial, but the gate allowed the call)"}, DelegateOS: receipts(nil)}
		}
		if resp.Error.Code == gate.DenialCode && d.Type != "" {
			// The gate's denial, with the type and message an MCP client
			// would get.
			msg := resp.Error.Message
			if d.Type == "approval_unavailable" && x.approvals == nil {
				// The relay's words are for an MCP client; an LDP peer is
				// never the one asked (it would approve its own task).
				msg = fmt.Sprintf("%s: approval_unavailable — tool %s needs a person's approval under this delegate's policy; an LDP peer is not asked (it would approve its own task), and this delegate names no approvers (ldp.approvers), so the task is refused", gate.DenialMessage, sk.Tool)
			}
			return nil, &ldp.TaskError{LdpError: ldp.LdpError{Code: d.Type, Category: category(d.Type), Severity: "error", Message: msg,
				Retryable: retryable(d.Type)},
				DelegateOS: receipts(nil)}
		}
		return nil, &ldp.TaskError{LdpError: ldp.LdpError{Code: "jsonrpc_" + strconv.Itoa(resp.Error.Code), Category: ldp.CategoryRuntime,
			Severity: "error", Message: resp.Error.Message}, DelegateOS: receipts(nil)}
	}
	var result struct {
		IsError bool `json:"isError"`
	}
	json.Unmarshal(resp.Result, &result)
	if result.IsError {
		return nil, &ldp.TaskError{LdpError: ldp.LdpError{Code: "TOOL_ERROR", Category: ldp.CategoryRuntime, Severity: "error",
			Message: "the tool ran and failed", PartialOutput: resp.Result}, DelegateOS: receipts(nil)}
	}
	out := &ldp.Outcome{Output: resp.Result, DelegationID: delegation}
	if tc := x.contracts[sk.Name]; tc != nil {
		// The contract's verification runs on the tool's structured
		// result when it gives one, else on the whole result.
		checked := resp.Result
		var r struct {
			Structured json.RawMessage `json:"structuredContent"`
		}
		if json.Unmarshal(resp.Result, &r) == nil && len(r.Structured) > 0 && string(r.Structured) != "null" {
			checked = r.Structured
		}
		spec, _ := tc.Spec()
		res, err := x.verifier.Verify(ctx, spec, tc.VerifyTask(), checked)
		if err != nil {
			return nil, denied("VERIFICATION_UNAVAILABLE", fmt.Sprintf("contract %s's verification could not run: %v", tc.ID, err))
		}
		if !res.Passed {
			return nil, &ldp.TaskError{LdpError: ldp.LdpError{Code: "VERIFICATION_FAILED", Category: ldp.CategoryQuality, Severity: "error",
				Message: fmt.Sprintf("the result fails contract %s's verification: %s", tc.ID, res.Details), PartialOutput: resp.Result}, DelegateOS: receipts(nil)}
		}
		out.Verified, out.VerificationStatus = true, "tool_verified"
		out.Evidence = []ldp.EvidenceRef{{Source: "delegateos", Kind: "contract_verification", URI: tc.ID, Summary: "passed"}}
	}
	// The cost charged is the gate's: its execution receipt's, which the
	// tap sees (an upstream-reported cost included); else what the
	// policy the call was sent under says it costs (unless the upstream
	// may report its own cost, which this front does not see). Never the
	// policy in force after the call: a reload while the tool ran does
	// not change what was charged.
	if x.tap != nil {
		out.DelegateOS = receipts(out.DelegateOS)
		if n, ok := x.tap.charged(rc); ok {
			quoted, quotedOK = n, true
		}
	}
	if quotedOK {
		if out.DelegateOS == nil {
			out.DelegateOS = &ldp.ProvenanceDOS{}
		}
		c := quoted
		out.DelegateOS.CostChargedMicrocents = &c
	}
	return out, nil
}

// ldpAttestingExec also takes ATTESTATION: its claim is one AVP peer
// attestation (reputation.ParseAttestations) of this delegate's work on
// one task, signed by the peer that sends the envelope (its Ed25519
// signer), which submitted that task in this session and saw it end; its
// context is TaskContext(delegate, task). It is recorded in the policy's
// workspace as an RDP signal under the rules of 'delegateos reputation
// attest' (signatures, duplicates, self-dealing), once per task.
type ldpAttestingExec struct {
	*ldpExec
	w *reputation.Workspace
	// did is this delegate's did:key, the subject of every attestation.
	did string
}

// TaskContext is the context of an AVP attestation of delegate's work on
// task taskID, as an ATTESTATION carries it: "ldp:DELEGATE_ID:TASK_ID",
// the evidence 'ldp submit --record' writes.
func TaskContext(delegate, taskID string) string { return "ldp:" + delegate + ":" + taskID }

func (x *ldpAttestingExec) Attest(_ context.Context, _ ldp.Session, e *ldp.Envelope, by ldp.Verified, claim func(string) (func(), *ldp.LdpError)) error {
	if by.Algorithm != ldp.AlgEd25519 {
		return denied(string(ldp.ReasonWrongKey), "an attestation must be sent signed with ed25519 by the peer that attests")
	}
	atts, err := reputation.ParseAttestations(e.Body.(*ldp.Attestation).Claim)
	if err != nil {
		return denied("ATTESTATION_INVALID", err.Error())
	}
	if len(atts) != 1 {
		return denied("ATTESTATION_INVALID", fmt.Sprintf("an ATTESTATION carries one attestation, of one task; this one carries %d", len(atts)))
	}
	a := atts[0]
	if !reputation.SameAgent(a.FromDID, by.Signer) {
		return denied(string(ldp.ReasonWrongKey), fmt.Sprintf("an attestation by %s sent by %s: a peer sends only its own", a.FromDID, by.Signer))
	}
	if !reputation.SameAgent(a.ToDID, x.did) {
		return denied(ldp.CodeAttestationSubject, fmt.Sprintf("the attestation is about %s; a peer attests this delegate (%s) only, on a task it submitted here", a.ToDID, x.did))
	}
	prefix := TaskContext(x.cfg.DelegateID, "")
	taskID, ok := strings.CutPrefix(a.Context, prefix)
	if !ok || taskID == "" {
		return denied(ldp.CodeAttestationSubject, fmt.Sprintf("the attestation's context %q names no task: it must be %sTASK_ID", a.Context, prefix))
	}
	release, le := claim(taskID)
	if le != nil {
		return &ldp.TaskError{LdpError: *le}
	}
	if _, err := x.w.RecordAttestations(atts, time.Now()); err != nil {
		release()
		return denied(ldp.CodeAttestationRefused, err.Error())
	}
	return nil
}

// toolArguments are the tool's arguments for a task: the skill's fixed
// arguments, with the task's input in its input argument; or, without
// either, the task's input object itself.
func toolArguments(sk *policy.LDPSkill, t *ldp.Task) (map[string]json.RawMessage, error) {
	args := map[string]json.RawMessage{}
	if sk.Arguments != nil {
		if err := json.Unmarshal(sk.Arguments, &args); err != nil {
			return nil, err
		}
	}
	in := t.Submit.Input
	if sk.InputArgument == "" {
		if sk.Arguments != nil {
			return args, nil
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(in, &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("skill %s takes a JSON object as its input (the tool's arguments)", sk.Name)
		}
		return obj, nil
	}
	if t.Mode == ldp.ModeSemanticFrame {
		var f map[string]json.RawMessage
		json.Unmarshal(in, &f)
		if v, ok := f["input"]; ok {
			in = v
		} else {
			in = f["instruction"]
		}
	}
	args[sk.InputArgument] = in
	return args, nil
}

type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// jsonrpcResponse reads the response to the request whose id is id (as
// JSON) from a JSON body or from the SSE stream's events (the last one
// with that id).
func jsonrpcResponse(w *captureWriter, id string) (*rpcResponse, error) {
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	var candidates [][]byte
	if strings.HasPrefix(w.header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(w.body.Bytes()))
		sc.Buffer(nil, ldp.MaxEnvelopeSize)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				candidates = append(candidates, []byte(strings.TrimSpace(d)))
			}
		}
	} else {
		candidates = [][]byte{w.body.Bytes()}
	}
	for i := len(candidates) - 1; i >= 0; i-- {
		var r rpcResponse
		if json.Unmarshal(candidates[i], &r) == nil && string(r.ID) == id && (r.Result != nil || r.Error != nil) {
			return &r, nil
		}
	}
	return nil, fmt.Errorf("the MCP endpoint answered %d without a response: %.200s", status, w.body.String())
}

// captureWriter collects an in-process response.
type captureWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *captureWriter) Header() http.Header         { return w.header }
func (w *captureWriter) WriteHeader(status int)      { w.status = status }
func (w *captureWriter) Write(b []byte) (int, error) { return w.body.Write(b) }
func (w *captureWriter) Flush()                      {}

// latencies keeps the last durations of each skill's calls, for the
// card's latency_hint_ms_p50: what this server measured, not a claim.
type latencies struct {
	mu sync.Mutex
	m  map[string][]time.Duration
}

// latencyWindow is how many recent calls of a skill the median is of.
const latencyWindow = 101

func (l *latencies) add(skill string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string][]time.Duration{}
	}
	ds := append(l.m[skill], d)
	if len(ds) > latencyWindow {
		ds = ds[len(ds)-latencyWindow:]
	}
	l.m[skill] = ds
}

// card returns a copy of c whose capabilities carry the measured medians.
func (l *latencies) card(c *ldp.IdentityCard) *ldp.IdentityCard {
	out := *c
	out.Capabilities = append([]ldp.Capability(nil), c.Capabilities...)
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range out.Capabilities {
		ds := l.m[out.Capabilities[i].Name]
		if len(ds) == 0 {
			continue
		}
		sorted := slices.Clone(ds)
		slices.Sort(sorted)
		ms := uint64((sorted[len(sorted)/2] + time.Millisecond - 1) / time.Millisecond) // rounded up
		out.Capabilities[i].LatencyHintMsP50 = &ms
	}
	return &out
}
