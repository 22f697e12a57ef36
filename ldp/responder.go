package ldp

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/delegateos/delegateos/internal/timestamp"
)

// An Executor performs the tasks a Responder admits. The daemon's runs
// each through the gate; its errors become TASK_FAILED.
type Executor interface {
	Execute(ctx context.Context, t *Task) (*Outcome, error)
}

// An Attester takes the ATTESTATION messages of a session (an Executor may
// also be one). Without one, ATTESTATION is answered TASK_FAILED. claim
// marks the task the attestation is about as attested: it refuses (with
// the LdpError to answer) a task the sender did not submit in this
// session, one that has not ended, and one attested before; the Attester
// calls release when it does not record the attestation after all.
type Attester interface {
	Attest(ctx context.Context, s Session, e *Envelope, by Verified, claim func(taskID string) (release func(), le *LdpError)) error
}

// A Quoter says what a task will cost before it runs (an Executor may also
// be one): what a contract's budget is held to. known false means the
// cost cannot be told in advance.
type Quoter interface {
	Quote(t *Task) (microcents int64, known bool)
}

// Task is a TASK_SUBMIT admitted to a session: signed (when the Responder
// checks signatures), in a live session of its sender, for a skill the
// card lists, with input valid for its payload mode.
type Task struct {
	Session  Session
	Envelope *Envelope
	Submit   *TaskSubmit
	// Mode is the payload mode the task was sent in.
	Mode PayloadMode
	// By is who signed the envelope (zero when signatures are not checked).
	By Verified
	// Principals are the principals of the token's chain (its issuer and
	// every delegatee), which the Executor sets when it reads the token:
	// this delegate refuses an ATTESTATION of the task when its own key is
	// among them (self-dealing).
	Principals []string
	// Token is the delegation token the task runs under: the TASK_SUBMIT's
	// delegateos member, else the request's bearer token, else the
	// SESSION_PROPOSE's delegateos member; nil when there is none.
	Token *DelegateOSMember
	// Tree is the delegation tree the task's token belongs to (see
	// Responder.Tree), what an Executor counts the task's shares by; empty
	// without Responder.Tree.
	Tree string
	// Update sends a TASK_UPDATE to the initiator when the request is a
	// stream; otherwise it does nothing. It is never nil.
	Update func(progress *float64, message string)

	recheck func() *LdpError
}

// Recheck checks the task against its contract's terms again, with the
// clock and the costs in force now: an Executor whose task waited (for an
// approver) calls it before the task runs, as the Responder did before
// handing it over. A non-nil LdpError (CONTRACT_REFUSED) is the task's
// failure.
func (t *Task) Recheck() *LdpError {
	if t.recheck == nil {
		return nil
	}
	return t.recheck()
}

// Outcome is what a task produced.
type Outcome struct {
	Output     json.RawMessage
	Confidence *float64
	// Verified is true only when an independent check of the output ran
	// and passed; VerificationStatus says which (reference values).
	Verified           bool
	VerificationStatus string
	TokensUsed         *uint64
	CostUSD            *float64
	DelegateOS         *ProvenanceDOS
	// Evidence names what the verification was, for provenance.
	Evidence []EvidenceRef
	// DelegationID is the delegation the task ran under, for its
	// attestation; empty when there is no token.
	DelegationID string
}

// TaskError is a task that failed with an LDP error to report as is (the
// gate's denials, with their type and message).
type TaskError struct {
	LdpError
	// DelegateOS, when set, is the TASK_FAILED's delegateos member.
	DelegateOS *ProvenanceDOS
}

func (e *TaskError) Error() string { return e.Code + ": " + e.Message }

// Responder is the delegate side of LDP: it answers each envelope with
// the next message of §5's lifecycle. It speaks no HTTP (Handler does).
type Responder struct {
	// Card is this delegate's identity card; required.
	Card *IdentityCard
	// Cards, when set, is the card in force (a reload may change what
	// its capabilities state); nil means Card. It must name the same
	// delegate and skills as Card.
	Cards func() *IdentityCard
	// Key signs replies with the Ed25519 profile, except replies to an
	// HMAC envelope, which are signed with the Verifier's secret; nil
	// means other replies are not signed.
	Key ed25519.PrivateKey
	// Verifier checks every envelope's signature, freshness and replay;
	// nil means envelopes are taken unsigned (tests, trusted transports).
	Verifier *Verifier
	// Sessions holds the sessions; nil means a table of the Responder's
	// own with the defaults.
	Sessions *Sessions
	// Exec performs tasks; required.
	Exec Executor
	// AdmitSession, when not nil, decides whether a SESSION_PROPOSE that
	// passed the signature and trust checks may open a session (the daemon
	// requires a token the gate accepts); a non-nil error is the
	// SESSION_REJECT's. token is the SESSION_PROPOSE's delegateos member,
	// else the request's bearer token. Nil admits every session.
	AdmitSession func(ctx context.Context, e *Envelope, by Verified, token *DelegateOSMember) *LdpError
	// Attestations, when set, keeps the TaskAttestation of every
	// TASK_RESULT (a Responder with a Key issues one per result and names
	// it in provenance); a result whose attestation cannot be stored is
	// not sent.
	Attestations TaskAttestationStore
	// Tree, when set, names the delegation tree of a token (its root
	// delegation, which its holders cannot multiply as they can keys):
	// sessions, places in the replay store and an Executor's other shares
	// (Task.Tree) are counted per tree, so that one token's holder
	// delegating to keys of its own does not take every place. Peers
	// without a token are counted together: those that sign with the
	// shared secret in one tree, every other one in another. Nil means per peer only.
	Tree func(tok *DelegateOSMember) string
	// TokenRefused, when set, says whether a session's token is no longer
	// accepted (revoked, expired): before a tree is refused for its share
	// of sessions, its sessions under such tokens are closed (their tasks
	// end), at most once per TreeRecheck for a tree.
	TokenRefused func(tok *DelegateOSMember) bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	initOnce sync.Once
	own      Sessions
	mu       sync.Mutex
	running  map[string]context.CancelCauseFunc
	// rechecked is when each tree's sessions' tokens were last checked
	// (TokenRefused).
	rechecked map[string]time.Time
	// tasks are the sessions' tasks, for ATTESTATION.
	tasks attestable
}

// Reply codes a Responder answers with, beside the session and trust codes.
const (
	CodeUnexpected   = "UNEXPECTED_MESSAGE"
	CodeMisaddressed = "MISADDRESSED"
	CodeSkillUnknown = "SKILL_UNKNOWN"
	CodeFrameInvalid = "SEMANTIC_FRAME_INVALID"
	CodeInputInvalid = "INPUT_INVALID"
	CodeTaskFailed   = "TASK_EXECUTION_ERROR"
	CodeTaskUnknown  = "TASK_UNKNOWN"
	CodeTaskRunning  = "TASK_RUNNING"
	CodeContract     = "CONTRACT_REFUSED"
	// CodeTaskCancelled: the task ended before its result, by TASK_CANCEL
	// or with its session (closed or expired).
	CodeTaskCancelled = "TASK_CANCELLED"
	CodeNoAttester    = "ATTESTATION_UNSUPPORTED"
	// CodeAttestationFailed: the result was produced but could not be
	// attested (its attestation could not be signed or stored).
	CodeAttestationFailed = "ATTESTATION_FAILED"
	// CodeBearerUnsigned: an Ed25519-signed SESSION_PROPOSE or TASK_SUBMIT
	// came with an Authorization: Bearer token other than the one its
	// signed members name (the TASK_SUBMIT's delegateos member, else the
	// SESSION_PROPOSE's): the signature does not cover the header, so it
	// does not choose the token.
	CodeBearerUnsigned = "BEARER_UNSIGNED"
)

func (r *Responder) init() {
	r.initOnce.Do(func() {
		r.own.Now = r.Now
		r.running = map[string]context.CancelCauseFunc{}
	})
}

// card is the identity card in force.
func (r *Responder) card() *IdentityCard {
	if r.Cards != nil {
		if c := r.Cards(); c != nil {
			return c
		}
	}
	return r.Card
}

func (r *Responder) sessions() *Sessions {
	if r.Sessions != nil {
		return r.Sessions
	}
	return &r.own
}

func (r *Responder) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Handle reads one envelope and returns the reply; bearer is the request's
// bearer token (empty when none) and emit, when not nil, receives the
// TASK_UPDATEs of a streamed task before Handle returns. An envelope that
// does not parse has no one to reply to: Handle returns its *Error. A nil
// reply with a nil error means the message was taken and needs none
// (ATTESTATION).
func (r *Responder) Handle(ctx context.Context, data []byte, bearer string, emit func(*Envelope)) (*Envelope, error) {
	r.init()
	e, err := ParseEnvelope(data)
	if err != nil {
		return nil, err
	}
	var by Verified
	if r.Verifier != nil {
		// Within a session, envelopes are signed as the one that opened
		// it was: by the same key, or with the shared secret.
		signer, inSession := "", false
		if e.SessionID != "" {
			if s, ok := r.sessions().Get(e.SessionID); ok && s.Peer == e.From {
				inSession = true
				signer = s.PeerSigner
				if e.SignatureAlgorithm != s.PeerAlgorithm && e.Signature != "" {
					return r.refuse(e, securityError(refuse(ReasonWrongKey, "session %s was opened with %s; its envelopes must be signed so", s.ID, s.PeerAlgorithm))), nil
				}
			}
		}
		if by, err = r.Verifier.Check(e, signer); err != nil {
			var le *Error
			errors.As(err, &le)
			return r.refuse(e, securityError(le)), nil
		}
		// A replayed HELLO changes nothing, and a SESSION_PROPOSE takes a
		// place in the replay store only once it is admitted (propose):
		// neither lets a stranger's key fill the store.
		switch e.Body.(type) {
		case *Hello, *SessionPropose:
		default:
			// Everything else belongs to a session of its sender, which
			// only an admitted peer has: a stranger's envelope is refused
			// before it takes a place in the store.
			if !inSession {
				return r.refuse(e, sessionLdpError(&SessionError{CodeSessionUnknown, fmt.Sprintf("no session %q of %s", clip(e.SessionID), clip(e.From))})), nil
			}
			// Counted in the share of the session's delegation tree.
			spent := by
			if s, ok := r.sessions().Get(e.SessionID); ok {
				spent.Share = s.Tree
			}
			if err := r.Verifier.Spend(ctx, e, spent); err != nil {
				var le *Error
				errors.As(err, &le)
				return r.refuse(e, securityError(le)), nil
			}
		}
	}
	if reached, _ := ctx.Value(requestEndpointKey{}).(string); e.To != r.card().DelegateID && e.To != r.card().Endpoint && (reached == "" || e.To != reached) {
		return r.refuse(e, LdpError{Code: CodeMisaddressed, Category: "identity", Severity: "error",
			Message: fmt.Sprintf("the envelope is addressed to %q; this delegate is %s", clip(e.To), r.card().DelegateID)}), nil
	}
	switch b := e.Body.(type) {
	case *Hello:
		return r.reply(e, "", &CapabilityManifest{Capabilities: r.manifest()}, ModeText), nil
	case *SessionPropose:
		return r.propose(ctx, e, b, by, bearer), nil
	case *TaskSubmit:
		return r.submit(ctx, e, b, by, bearer, emit), nil
	case *TaskCancel:
		return r.cancel(e, b), nil
	case *Attestation:
		return r.attest(ctx, e, by)
	case *SessionClose:
		s, err := r.sessions().Close(e.SessionID, e.From, "closed by the initiator")
		if err != nil {
			return r.refuse(e, sessionLdpError(err)), nil
		}
		// The session's tasks end with it, before the close is
		// acknowledged: none runs (or is approved) afterwards.
		r.endSession(s.ID, errSessionClosed)
		return r.reply(e, s.ID, &SessionClose{Reason: ptrTo("acknowledged")}, ModeText), nil
	}
	return r.refuse(e, LdpError{Code: CodeUnexpected, Category: "session", Severity: "error",
		Message: fmt.Sprintf("%s is a responder's message; a delegate does not take it", e.Body.Type())}), nil
}

func ptrTo[T any](v T) *T { return &v }

// manifest is the CAPABILITY_MANIFEST's capabilities: the object form of
// the spec's example flow (skills, supported_modes, which the Rust SDK
// reads), with the card's capabilities in full.
func (r *Responder) manifest() json.RawMessage {
	skills := make([]string, len(r.card().Capabilities))
	for i, c := range r.card().Capabilities {
		skills[i] = c.Name
	}
	b, _ := json.Marshal(map[string]any{
		"skills":          skills,
		"supported_modes": r.card().SupportedPayloadModes,
		"capabilities":    r.card().Capabilities,
	})
	return b
}

func (r *Responder) propose(ctx context.Context, e *Envelope, b *SessionPropose, by Verified, bearer string) *Envelope {
	c := b.Config
	if err := CheckTrust(r.card().TrustDomain, c.TrustDomain, c.RequiredTrustDomain); err != nil {
		var te *TrustError
		errors.As(err, &te)
		return r.reply(e, "", &SessionReject{Reason: te.Detail, Error: &LdpError{Code: te.Code, Category: "policy",
			Message: te.Detail, Severity: "fatal"}}, ModeText)
	}
	prefs := c.PreferredPayloadModes
	if len(prefs) == 0 {
		prefs = DefaultPreferredModes
	}
	var ttl time.Duration
	if c.TTLSecs != nil {
		ttl = time.Duration(*c.TTLSecs) * time.Second
	}
	tok, le := r.token(e, Session{}, by, bearer)
	if le != nil {
		return r.reply(e, "", &SessionReject{Reason: le.Message, Error: le}, ModeText)
	}
	if r.AdmitSession != nil {
		if le := r.AdmitSession(ctx, e, by, tok); le != nil {
			return r.reply(e, "", &SessionReject{Reason: le.Message, Error: le}, ModeText)
		}
	}
	tree := r.treeOf(e, by, tok)
	if r.Verifier != nil {
		spent := by
		spent.Share = tree
		if err := r.Verifier.Spend(ctx, e, spent); err != nil {
			var le *Error
			errors.As(err, &le)
			return r.refuse(e, securityError(le))
		}
	}
	n := Negotiate(prefs, r.card().SupportedPayloadModes)
	s, err := r.sessions().Open(e.From, by, e.DelegateOS, tree, n, ttl)
	if err != nil && tree != "" && r.endRefused(tree) {
		s, err = r.sessions().Open(e.From, by, e.DelegateOS, tree, n, ttl)
	}
	if err != nil {
		le := sessionLdpError(err)
		return r.reply(e, "", &SessionReject{Reason: le.Message, Error: &le}, ModeText)
	}
	return r.reply(e, s.ID, &SessionAccept{SessionID: s.ID, NegotiatedMode: n.Mode, FallbackChain: n.Fallback}, ModeText)
}

func (r *Responder) submit(ctx context.Context, e *Envelope, b *TaskSubmit, by Verified, bearer string, emit func(*Envelope)) (answer *Envelope) {
	fail := func(le LdpError) *Envelope {
		return r.reply(e, e.SessionID, &TaskFailed{TaskID: b.TaskID, Error: le}, e.PayloadMode)
	}
	if r.card().Capability(b.Skill) == nil {
		return fail(LdpError{Code: CodeSkillUnknown, Category: "capability", Severity: "error",
			Message: fmt.Sprintf("this delegate has no skill %q", clip(b.Skill))})
	}
	if err := ValidateInput(e.PayloadMode, b.Input); err != nil {
		var fe *FrameError
		if !errors.As(err, &fe) {
			return fail(LdpError{Code: CodeInputInvalid, Category: "capability", Severity: "error", Message: err.Error()})
		}
		// §4.3: the session falls back and stays open; the initiator
		// resubmits in the next mode.
		s, ferr := r.sessions().FallBack(e.SessionID, e.From, e.PayloadMode)
		if ferr != nil && !errors.Is(ferr, ErrNoFallback) {
			return fail(sessionLdpError(ferr))
		}
		msg := fe.Error()
		if ferr == nil {
			msg += "; the session continues in " + string(s.Payload.Mode)
		}
		return fail(LdpError{Code: CodeFrameInvalid, Category: "quality", Severity: "warning", Retryable: ferr == nil, Message: msg})
	}
	if c := b.Contract; c != nil && c.Deadline != "" {
		if d, _ := timestamp.Parse(c.Deadline); !r.now().Before(d) {
			return fail(LdpError{Code: CodeContract, Category: "policy", Severity: "error",
				Message: fmt.Sprintf("the contract's deadline %s has passed", c.Deadline)})
		}
	}
	s, err := r.sessions().Use(e.SessionID, e.From, e.PayloadMode)
	if err != nil {
		return fail(sessionLdpError(err))
	}
	tok, le := r.token(e, s, by, bearer)
	if le != nil {
		return fail(*le)
	}
	task := &Task{Session: s, Envelope: e, Submit: b, Mode: e.PayloadMode, By: by, Token: tok}
	task.Tree = r.treeOf(e, by, task.Token)
	task.recheck = func() *LdpError { return r.contractTerms(task) }
	if le := task.Recheck(); le != nil {
		return fail(*le)
	}
	task.Update = func(progress *float64, message string) {
		if emit == nil {
			return
		}
		var m *string
		if message != "" {
			m = &message
		}
		emit(r.reply(e, s.ID, &TaskUpdate{TaskID: b.TaskID, Progress: progress, Message: m}, e.PayloadMode))
	}
	key := s.ID + "\x00" + b.TaskID
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.mu.Lock()
	if _, busy := r.running[key]; busy {
		r.mu.Unlock()
		return fail(LdpError{Code: CodeTaskRunning, Category: "session", Severity: "error",
			Message: fmt.Sprintf("task %s is already running in this session", b.TaskID)})
	}
	r.running[key] = cancel
	r.mu.Unlock()
	r.noteTask(s.ID, b.TaskID, taskRunning, nil)
	// A task lives no longer than its session: when the session expires
	// while the task runs (or waits), the task ends.
	stopWatch := r.watchSession(s)
	defer func() {
		stopWatch()
		r.mu.Lock()
		delete(r.running, key)
		r.mu.Unlock()
		// Only work of this delegate's is attestable: a result, or a
		// failure in its own categories; not a refusal, nor a task its
		// initiator cancelled.
		st := taskRefused
		switch rb := answer.Body.(type) {
		case *TaskResult:
			st = taskEnded
		case *TaskFailed:
			if DelegatesFailure(rb.Error) && rb.Error.Code != "TASK_CANCELLED" {
				st = taskEnded
			}
		}
		r.noteTask(s.ID, b.TaskID, st, task.Principals)
	}()
	out, err := r.Exec.Execute(tctx, task)
	if err != nil {
		var te *TaskError
		if errors.As(err, &te) {
			if te.DelegateOS != nil {
				return r.reply(e, e.SessionID, &TaskFailed{TaskID: b.TaskID, Error: te.LdpError, DelegateOS: te.DelegateOS}, e.PayloadMode)
			}
			return fail(te.LdpError)
		}
		if tctx.Err() != nil && ctx.Err() == nil {
			msg := "the task was cancelled"
			if c := context.Cause(tctx); c != nil && !errors.Is(c, context.Canceled) {
				msg = "the task was cancelled: " + c.Error()
			}
			return fail(LdpError{Code: CodeTaskCancelled, Category: "runtime", Severity: "warning", Message: msg})
		}
		return fail(LdpError{Code: CodeTaskFailed, Category: "runtime", Severity: "error", Retryable: true, Message: err.Error()})
	}
	p := &Provenance{
		ProducedBy:         r.card().DelegateID,
		ModelVersion:       r.card().ModelVersion,
		PayloadModeUsed:    e.PayloadMode,
		Confidence:         out.Confidence,
		Verified:           out.Verified,
		VerificationStatus: out.VerificationStatus,
		SessionID:          s.ID,
		Timestamp:          timestamp.Format(r.now()),
		TokensUsed:         out.TokensUsed,
		CostUSD:            out.CostUSD,
		DelegateOS:         out.DelegateOS,
		Evidence:           out.Evidence,
	}
	if p.VerificationStatus == "" {
		p.VerificationStatus = "unverified"
		if p.Verified {
			p.VerificationStatus = "tool_verified"
		}
	}
	if b.Contract != nil {
		p.ContractID = b.Contract.ContractID
	}
	if r.Key != nil {
		a, err := r.attestTask(e, b, s, by, out, p)
		if err != nil {
			return fail(LdpError{Code: CodeAttestationFailed, Category: "runtime", Severity: "error", Retryable: true,
				Message: "the result could not be attested: " + err.Error()})
		}
		raw, err := json.Marshal(a)
		if err != nil {
			return fail(LdpError{Code: CodeAttestationFailed, Category: "runtime", Severity: "error", Retryable: true,
				Message: "the result could not be attested: " + err.Error()})
		}
		d := ProvenanceDOS{}
		if p.DelegateOS != nil {
			d = *p.DelegateOS
		}
		// Signed here, by Sign after its check of every member: the
		// reply's own check does not verify the signature again (the
		// initiator does, VerifyResult).
		d.AttestationID, d.Attestation = a.ID, raw
		d.verified = &verifiedAttestation{raw: bytes.Clone(raw), a: *a}
		p.DelegateOS = &d
	}
	reply := r.envelope(e, s.ID, &TaskResult{TaskID: b.TaskID, Output: out.Output, Provenance: *p}, e.PayloadMode)
	reply.Provenance = p
	if err := reply.Check(); err != nil {
		return fail(LdpError{Code: CodeTaskFailed, Category: "runtime", Severity: "error", Message: "the result is not a valid TASK_RESULT: " + err.Error()})
	}
	return r.sign(reply, e)
}

// A SessionEnder is told (an Executor may also be one) that a session
// ended (closed, or expired) while tasks of it ran: it must drop, before
// returning, whatever it holds for them that others could still act on
// (a task waiting for an approver). The tasks' contexts are cancelled too.
type SessionEnder interface {
	EndSession(sessionID string)
}

var (
	errSessionClosed  = errors.New("its session was closed")
	errSessionExpired = errors.New("its session expired")
)

// TreeRecheck is how often, at most, a tree refused its share of sessions
// has its sessions' tokens checked again (Responder.TokenRefused): each
// check verifies every distinct token of the tree's sessions.
const TreeRecheck = time.Second

var errSessionTokenRefused = errors.New("its session's token is no longer accepted")

// endRefused closes tree's sessions whose token is no longer accepted
// (not more often than TreeRecheck) and ends their tasks; it reports
// whether it closed any.
func (r *Responder) endRefused(tree string) bool {
	if r.TokenRefused == nil {
		return false
	}
	now := r.now()
	r.mu.Lock()
	if last, ok := r.rechecked[tree]; ok && now.Sub(last) < TreeRecheck {
		r.mu.Unlock()
		return false
	}
	if r.rechecked == nil || len(r.rechecked) > DefaultMaxSessions {
		r.rechecked = map[string]time.Time{}
	}
	r.rechecked[tree] = now
	r.mu.Unlock()
	ended := r.sessions().EndRefused(tree, r.TokenRefused)
	for _, id := range ended {
		r.endSession(id, errSessionTokenRefused)
	}
	return len(ended) > 0
}

// endSession cancels the running tasks of session sid with cause, and
// tells the Executor.
func (r *Responder) endSession(sid string, cause error) {
	prefix := sid + "\x00"
	r.mu.Lock()
	for k, cancel := range r.running {
		if strings.HasPrefix(k, prefix) {
			cancel(cause)
		}
	}
	r.mu.Unlock()
	if se, ok := r.Exec.(SessionEnder); ok {
		se.EndSession(sid)
	}
}

// watchSession ends the tasks of session s when it expires (its TTL idle;
// other messages of the session push the expiry on): a timer, re-armed
// while the session lives. Call stop when the task ends.
func (r *Responder) watchSession(s Session) (stop func()) {
	var mu sync.Mutex
	stopped := false
	var tm *time.Timer
	var check func()
	check = func() {
		cur, ok := r.sessions().Get(s.ID)
		if ok && (cur.State == StateActive || cur.State == StateSuspended) {
			mu.Lock()
			if !stopped {
				// At least a tenth of a second: a session table with a
				// clock of its own may still call it live.
				tm = time.AfterFunc(max(cur.LastUsed.Add(cur.TTL).Sub(r.now()), 100*time.Millisecond), check)
			}
			mu.Unlock()
			return
		}
		cause := errSessionExpired
		if ok && cur.CloseReason != "expired" {
			cause = errSessionClosed
		}
		r.endSession(s.ID, cause)
	}
	mu.Lock()
	tm = time.AfterFunc(max(s.LastUsed.Add(s.TTL).Sub(r.now()), time.Millisecond), check)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		tm.Stop()
		mu.Unlock()
	}
}

// contractTerms checks a task against its contract's terms, with the
// card and the costs in force: its deadline has not passed, and its
// budget holds the task. The budget is honoured or the task refused,
// never ignored: a task whose cost this delegate states (its Executor's
// quote for this very task, else the card's) is over it, or that states
// none, is refused.
func (r *Responder) contractTerms(t *Task) *LdpError {
	b := t.Submit
	c := b.Contract
	if c == nil {
		return nil
	}
	if c.Deadline != "" {
		if d, _ := timestamp.Parse(c.Deadline); !r.now().Before(d) {
			return &LdpError{Code: CodeContract, Category: "policy", Severity: "error",
				Message: fmt.Sprintf("the contract's deadline %s has passed", c.Deadline)}
		}
	}
	if c.Policy.Budget == nil || c.Policy.Budget.MaxCostUSD == nil {
		return nil
	}
	max := *c.Policy.Budget.MaxCostUSD
	cost := int64(-1)
	if q, ok := r.Exec.(Quoter); ok {
		if n, known := q.Quote(t); known && n >= 0 {
			cost = n
		}
	} else {
		cost = skillCost(r.card(), r.card().Capability(b.Skill))
	}
	if cost < 0 || cost > BudgetMicrocents(max) {
		msg := fmt.Sprintf("the contract's budget is %g USD; skill %s costs %d microcents (%g USD) here", max, b.Skill, cost, float64(cost)/MicrocentsPerUSD)
		if cost < 0 {
			msg = fmt.Sprintf("the contract's budget is %g USD, and this delegate states no cost for skill %s to hold it to", max, b.Skill)
		}
		return &LdpError{Code: CodeContract, Category: "policy", Severity: "error", Message: msg}
	}
	return nil
}

// BudgetMicrocents is a contract budget in USD as whole microcents, down
// (a product within a millionth of a microcent of a whole one, as 2e-6 USD
// gives, is that one): what a task's cost is held to.
func BudgetMicrocents(usd float64) int64 {
	x := usd * MicrocentsPerUSD
	switch {
	case x != x || x < 0:
		return 0
	case x >= math.MaxInt64:
		return math.MaxInt64
	}
	if r := math.Round(x); math.Abs(x-r) < 1e-6 {
		return int64(r)
	}
	return int64(math.Floor(x))
}

// noteTask records where a task of session sid stands, and the principals
// of its token's chain, for ATTESTATION.
func (r *Responder) noteTask(sid, taskID string, st taskState, chain []string) {
	max := r.sessions().Max
	if max <= 0 {
		max = DefaultMaxSessions
	}
	if chain == nil {
		chain = []string{}
	}
	r.tasks.set(sid, taskID, st, chain, max, func(id string) bool {
		_, ok := r.sessions().Get(id)
		return ok
	})
}

// attestTask signs and stores the attestation of a task's result.
func (r *Responder) attestTask(e *Envelope, b *TaskSubmit, s Session, by Verified, out *Outcome, p *Provenance) (*TaskAttestation, error) {
	req, err := EnvelopeHash(e)
	if err != nil {
		return nil, err
	}
	in, err := ValueHash(b.Input)
	if err != nil {
		return nil, err
	}
	outHash, err := ValueHash(out.Output)
	if err != nil {
		return nil, err
	}
	a := &TaskAttestation{ID: NewTaskAttestationID(), Version: TaskAttestationVersion, Delegate: r.card().DelegateID,
		Initiator: e.From, SessionID: s.ID, TaskID: b.TaskID, Skill: b.Skill, Request: req, InputHash: in,
		ContractID: p.ContractID, DelegationID: out.DelegationID, OutputHash: outHash, Verified: p.Verified,
		VerificationStatus: p.VerificationStatus, CreatedAt: timestamp.Format(r.now())}
	if by.Algorithm == AlgEd25519 {
		a.InitiatorSigner = by.Signer
	}
	if d := p.DelegateOS; d != nil {
		a.CostChargedMicrocents = d.CostChargedMicrocents
		a.ReceiptHashes = d.ReceiptHashes
	}
	if err := a.Sign(r.Key); err != nil {
		return nil, err
	}
	if r.Attestations != nil {
		if err := r.Attestations.Put(a); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// treeOf is the delegation tree whose shares e counts in (see
// Responder.Tree): its token's root, else that of every peer signing with
// the shared secret (its from is the sender's to write: the secret proves
// only that the sender is one of its holders), else that of every other
// peer without a token.
func (r *Responder) treeOf(e *Envelope, by Verified, tok *DelegateOSMember) string {
	if r.Tree == nil {
		return ""
	}
	if tok != nil {
		if t := r.Tree(tok); t != "" {
			return "dct:" + t
		}
	}
	if by.Algorithm == AlgHMACSHA256 {
		return "hmac"
	}
	return "tokenless"
}

// token is the delegation token a task (or, with a zero s, a session)
// runs under (see Task.Token). For an envelope whose Ed25519 signature was
// verified it comes only from signed members: the envelope's delegateos
// member, else the SESSION_PROPOSE's; a bearer token other than that one
// is refused (CodeBearerUnsigned), as the signature does not cover it.
func (r *Responder) token(e *Envelope, s Session, by Verified, bearer string) (*DelegateOSMember, *LdpError) {
	if by.Algorithm == AlgEd25519 {
		signed := e.DelegateOS
		if signed == nil {
			signed = s.Token
		}
		if bearer != "" && (signed == nil || signed.DCT != bearer) {
			return nil, &LdpError{Code: CodeBearerUnsigned, Category: CategorySecurity, Severity: "fatal",
				Message: "the Authorization: Bearer token is not the one this ed25519-signed envelope's delegateos member (or its session's SESSION_PROPOSE's) names, and the signature does not cover the header: send the token as the delegateos member"}
		}
		return signed, nil
	}
	if e.DelegateOS != nil {
		return e.DelegateOS, nil
	}
	if bearer != "" {
		return &DelegateOSMember{DCT: bearer}, nil
	}
	return s.Token, nil
}

func (r *Responder) cancel(e *Envelope, b *TaskCancel) *Envelope {
	if _, err := r.sessions().Touch(e.SessionID, e.From); err != nil {
		return r.reply(e, e.SessionID, &TaskFailed{TaskID: b.TaskID, Error: sessionLdpError(err)}, ModeText)
	}
	r.mu.Lock()
	cancel := r.running[e.SessionID+"\x00"+b.TaskID]
	r.mu.Unlock()
	if cancel == nil {
		return r.reply(e, e.SessionID, &TaskFailed{TaskID: b.TaskID, Error: LdpError{Code: CodeTaskUnknown, Category: "session",
			Severity: "warning", Message: fmt.Sprintf("task %s is not running in this session", b.TaskID)}}, ModeText)
	}
	cancel(nil)
	return r.reply(e, e.SessionID, &TaskUpdate{TaskID: b.TaskID, Message: ptrTo("cancelled")}, ModeText)
}

func (r *Responder) attest(ctx context.Context, e *Envelope, by Verified) (*Envelope, error) {
	s, err := r.sessions().Touch(e.SessionID, e.From)
	if err != nil {
		return r.refuse(e, sessionLdpError(err)), nil
	}
	a, ok := r.Exec.(Attester)
	if !ok {
		return r.refuse(e, LdpError{Code: CodeNoAttester, Category: "capability", Severity: "warning", Message: "this delegate records no attestations"}), nil
	}
	var self ed25519.PublicKey
	if r.Key != nil {
		self = r.Key.Public().(ed25519.PublicKey)
	}
	claim := func(taskID string) (func(), *LdpError) { return r.tasks.claim(s.ID, taskID, self) }
	if err := a.Attest(ctx, s, e, by, claim); err != nil {
		var te *TaskError
		if errors.As(err, &te) {
			return r.refuse(e, te.LdpError), nil
		}
		return r.refuse(e, LdpError{Code: CodeTaskFailed, Category: "runtime", Severity: "error", Message: err.Error()}), nil
	}
	return nil, nil
}

func securityError(e *Error) LdpError {
	return LdpError{Code: string(e.Reason), Category: "security", Message: e.Error(), Severity: "fatal"}
}

func sessionLdpError(err error) LdpError {
	var se *SessionError
	if errors.As(err, &se) {
		return LdpError{Code: se.Code, Category: "session", Severity: "error", Message: se.Detail,
			Retryable: se.Code == CodeSessionSuspended || se.Code == CodeSessionsFull}
	}
	return LdpError{Code: CodeTaskFailed, Category: "runtime", Severity: "error", Message: err.Error()}
}

// refuse answers e with its failure: SESSION_REJECT for a SESSION_PROPOSE,
// TASK_FAILED otherwise (the Python SDK answers a bad signature so too).
func (r *Responder) refuse(e *Envelope, le LdpError) *Envelope {
	if _, ok := e.Body.(*SessionPropose); ok {
		return r.reply(e, "", &SessionReject{Reason: le.Message, Error: &le}, ModeText)
	}
	return r.reply(e, e.SessionID, &TaskFailed{TaskID: TaskID(e.Body), Error: le}, ModeText)
}

// reply builds and signs the answer to e.
func (r *Responder) reply(e *Envelope, session string, body Body, mode PayloadMode) *Envelope {
	return r.sign(r.envelope(e, session, body, mode), e)
}

// envelope builds the answer to e, unsigned.
func (r *Responder) envelope(e *Envelope, session string, body Body, mode PayloadMode) *Envelope {
	if tf, ok := body.(*TaskFailed); ok && tf.TaskID == "" {
		// TASK_FAILED needs a task: answering a message that has none, the
		// reply names the message.
		tf.TaskID = "message:" + e.MessageID[:min(len(e.MessageID), MaxIDLen-len("message:"))]
	}
	out := &Envelope{
		MessageID:   newSessionID(),
		SessionID:   session,
		From:        r.card().DelegateID,
		To:          e.From,
		Body:        body,
		PayloadMode: mode,
		Timestamp:   timestamp.Format(r.now()),
		Nonce:       newNonce(),
	}
	return out
}

func (r *Responder) sign(out, in *Envelope) *Envelope {
	switch {
	case r.Verifier != nil && r.Verifier.HMACSecret != "" && in.SignatureAlgorithm == AlgHMACSHA256:
		// A peer of the reference SDKs checks replies with the secret.
		SignHMAC(out, r.Verifier.HMACSecret)
	case r.Key != nil:
		if err := SignEd25519(out, r.Key); err != nil {
			// A result whose numbers the signature cannot hold (an
			// integer beyond 2^53) is answered as the delegate's failure.
			f := r.envelope(in, out.SessionID, &TaskFailed{TaskID: TaskID(in.Body), Error: LdpError{Code: CodeTaskFailed,
				Category: "runtime", Severity: "error", Message: err.Error()}}, ModeText)
			if SignEd25519(f, r.Key) == nil {
				return f
			}
		}
	}
	return out
}

func newNonce() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
