package receipt

import (
	"encoding/hex"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/timestamp"
)

// Decision is what the proxy hands over about one gate decision; the
// audit log's writer turns it into a decision receipt, off the relay's
// path. Once handed over it is the writer's: the relay neither reads nor
// changes it again.
type Decision struct {
	Method, Target string
	// Requested is the capability the request needs (nil if none).
	Requested *dct.Capability
	// Scope is the verified token's scope (nil if no token verified); read
	// only, it is shared with other decisions. Token is the token it was
	// verified from, whose block IDs the receipt names.
	Scope *dct.AuthorizedScope
	Token string
	// Allowed, Unauthenticated and Enforced are the decision; DenialType
	// and DenialDetail say why a refused request was refused.
	Allowed, Unauthenticated, Enforced bool
	DenialType, DenialDetail           string
	// CostReserved is the reservation, in microcents.
	CostReserved int64
	// Payload is the SHA-256 of the request as the client sent it.
	Payload [32]byte
	// ArgumentsHash is the SHA-256 of params.arguments, when HasArguments.
	ArgumentsHash [32]byte
	HasArguments  bool
	// Arguments are params.arguments exactly as forwarded, kept only when
	// the policy includes them in receipts.
	Arguments []byte
	At        time.Time
	// PolicyHash, when set, is the hex SHA-256 of the policy file that
	// decided, in place of Options.PolicyHash: a policy reloaded while the
	// log is open names the decisions made by it.
	PolicyHash string
	// AuditID is the receipt's audit_id; "" has the writer make one. A
	// decision made on a person's approval is given its ID beforehand, for
	// the approval receipt's gate_audit_id, and names the approval by
	// ApprovalID and ApprovalReceiptHash (the approval receipt's digest,
	// which its execution receipt names too).
	AuditID                         string
	ApprovalID, ApprovalReceiptHash string
	// Waiting marks an allowed request held for a person's approval and
	// answered without being forwarded (MCP 2026-07-28 asks for the
	// approval that way): its receipt's decision is
	// WAITING_FOR_HUMAN_APPROVAL.
	Waiting bool

	// Set by the writer: the audit_id it made (when AuditID is ""), and
	// the digest of the receipt once it is written.
	id     [uuidLen]byte
	hasID  bool
	digest [32]byte
	signed bool
}

// Execution is what the proxy hands over about a forwarded call that
// ended: its execution receipt refers to its decision's.
type Execution struct {
	Decision *Decision
	// Request is the SHA-256 of the request as forwarded; Response that of
	// the response as returned, when HasResponse.
	Request, Response [32]byte
	HasResponse       bool
	// Result is the response's result exactly as returned to the client,
	// kept only when the policy includes results in receipts.
	Result             []byte
	CostCommitted      int64
	Started, Completed time.Time
	Outcome            string

	// Set by the writer: the digest of the receipt once it is written.
	digest [32]byte
	signed bool
}

// Signed records the digest (SHA-256) of e's receipt once it is written.
func (e *Execution) Signed(digest [32]byte) { e.digest, e.signed = digest, true }

// Digest is the hex digest of e's receipt once it is written (read it only
// after the writer is known to have passed it: audit.Log.Written).
func (e *Execution) Digest() (string, bool) {
	if !e.signed {
		return "", false
	}
	return hex.EncodeToString(e.digest[:]), true
}

// Options are the policy's choices for the receipts' contents.
type Options struct {
	// PolicyHash is the hex SHA-256 of the policy file.
	PolicyHash string
	// IncludeArguments and IncludeResults put arguments and results in
	// clear into receipts; otherwise only their hashes are.
	IncludeArguments, IncludeResults bool
	// BlockIDs finds a token's block IDs; nil parses each token.
	BlockIDs BlockIDs
	// AgentDIDs finds the did:key of a principal ID; nil converts each.
	AgentDIDs func(principal string) string
}

// Action is AVP's dotted action for an MCP method: mcp.tools.call.
func Action(method string) string {
	// The methods of nearly every receipt, without an allocation each.
	switch method {
	case "tools/call":
		return "mcp.tools.call"
	case "resources/read":
		return "mcp.resources.read"
	case "prompts/get":
		return "mcp.prompts.get"
	}
	return "mcp." + strings.ReplaceAll(method, "/", ".")
}

// NewUUIDURN returns a random (version 4) urn:uuid.
func NewUUIDURN() string {
	var out [uuidLen]byte
	newUUID(&out)
	return "urn:uuid:" + string(out[:])
}

func sha256Prefixed(h [32]byte) string {
	var out [7 + 64]byte
	copy(out[:], "sha256:")
	hex.Encode(out[7:], h[:])
	return string(out[:])
}

func agentDID(s *dct.AuthorizedScope, o *Options) string {
	if s == nil {
		return ""
	}
	if o.AgentDIDs != nil {
		return o.AgentDIDs(s.Delegatee)
	}
	return AgentDID(s.Delegatee)
}

// AgentDID is the did:key of a principal ID, or "" when it is not one.
func AgentDID(principal string) string {
	did, err := identity.DIDFromPrincipalID(principal)
	if err != nil {
		return ""
	}
	return did
}

// BlockIDs finds a token's block IDs; Body parses the token when nil.
type BlockIDs func(token string) []string

// ParseBlockIDs parses a token (already verified) for its block IDs.
func ParseBlockIDs(token string) []string {
	tok, err := dct.Parse(token)
	if err != nil {
		return nil
	}
	return tok.RevocationIDs()
}

// Body is d's decision receipt body (without position and proof). It
// gives d its audit_id.
func (d *Decision) Body(o *Options) *DecisionBody {
	d.ensureID()
	b := &DecisionBody{
		SchemaVersion: KindDecision, AuditID: d.auditIDString(), AgentDID: agentDID(d.Scope, o),
		Action: Action(d.Method), Resource: Clip(d.Target), Environment: EnvironmentUnknown,
		Decision: DecisionAllow, Reason: "allowed",
		PayloadHash: sha256Prefixed(d.Payload), PolicyContextHash: o.PolicyHash,
		Method: d.Method, DenialType: d.DenialType, DenialDetail: Clip(d.DenialDetail),
		CostReserved: d.CostReserved, Enforced: d.Enforced, DecidedAt: timestamp.Format(d.At),
		ApprovalID: d.ApprovalID, ApprovalReceiptHash: d.ApprovalReceiptHash,
	}
	if d.PolicyHash != "" {
		b.PolicyContextHash = d.PolicyHash
	}
	if d.Unauthenticated {
		b.Reason = "allowed_unauthenticated"
	}
	if d.Waiting && d.Allowed {
		b.Decision, b.Reason = DecisionWaiting, "waiting_for_human_approval"
	}
	if !d.Allowed {
		b.Decision, b.Reason = DecisionBlock, d.DenialType
	}
	if d.Requested != nil {
		b.Capability = &Capability{Namespace: Clip(d.Requested.Namespace), Action: Clip(d.Requested.Action), Resource: Clip(d.Requested.Resource)}
	}
	if d.Scope != nil {
		b.ContractID = d.Scope.ContractID
		if o.BlockIDs != nil {
			b.Chain = o.BlockIDs(d.Token)
		} else {
			b.Chain = ParseBlockIDs(d.Token)
		}
		b.DelegationPath = make([]string, len(d.Scope.Chain))
		for i, l := range d.Scope.Chain {
			b.DelegationPath[i] = l.DelegationID
		}
		if len(b.Chain) != len(b.DelegationPath) {
			b.Chain = nil
		}
	}
	if d.HasArguments {
		b.ArgumentsHash = sha256Prefixed(d.ArgumentsHash)
		if o.IncludeArguments {
			b.ArgumentsJSON, b.ArgumentsOmitted = clearText(d.Arguments)
		}
	}
	return b
}

// Signed records the digest (SHA-256) of d's receipt once it is written.
func (d *Decision) Signed(digest [32]byte) { d.digest, d.signed = digest, true }

// Digest is the hex digest of d's receipt once it is written (read it only
// after the writer is known to have passed it: audit.Log.Written).
func (d *Decision) Digest() (string, bool) { return d.digestString(), d.signed }

// digestString is the hex digest of d's receipt, "" before it is written.
func (d *Decision) digestString() string {
	if !d.signed {
		return ""
	}
	return hex.EncodeToString(d.digest[:])
}

// Body is e's execution receipt body (without position and proof). The
// decision's receipt must have been signed first.
func (e *Execution) Body(o *Options) *ExecutionBody {
	d := e.Decision
	b := &ExecutionBody{
		SchemaVersion: KindExecution, ReceiptID: NewUUIDURN(), GateAuditID: d.auditIDString(),
		AgentDID: agentDID(d.Scope, o), Action: Action(d.Method), Resource: Clip(d.Target),
		Environment: EnvironmentUnknown, Status: status(e.Outcome), Adapter: "mcp-stdio",
		Operation: d.Method, RequestHash: sha256Prefixed(e.Request), DecisionReceiptHash: d.digestString(),
		StartedAt: timestamp.Format(e.Started), CompletedAt: timestamp.Format(e.Completed),
		DurationMicros: max(e.Completed.Sub(e.Started).Microseconds(), 0), CostCommitted: e.CostCommitted,
		Outcome: e.Outcome, EvaluatorVersion: ExecutionEvaluator, ApprovalReceiptHash: d.ApprovalReceiptHash,
	}
	if d.HasArguments {
		b.ParamsHash = sha256Prefixed(d.ArgumentsHash)
	}
	if e.HasResponse {
		b.ResponseHash = sha256Prefixed(e.Response)
		if o.IncludeResults {
			b.ResultJSON, b.ResultOmitted = clearText(e.Result)
		}
	}
	return b
}

// clearText is JSON text forwarded, for a receipt's clear member: the
// text itself, byte for byte, or why no JSON string can hold it.
func clearText(text []byte) (string, string) {
	switch {
	case len(text) == 0:
		return "", ""
	case !utf8.Valid(text):
		return "", OmittedInvalidUTF8
	case len(text) > MaxBytes:
		return "", OmittedTooLarge
	}
	return string(text), ""
}

// OmitClear takes arguments or a result in clear out of a decision or
// execution receipt, marking them too large: a receipt that would
// exceed MaxBytes with them is written without.
func OmitClear(b Body) {
	switch b := b.(type) {
	case *DecisionBody:
		if b.ArgumentsJSON != "" {
			b.ArgumentsJSON, b.ArgumentsOmitted = "", OmittedTooLarge
		}
	case *ExecutionBody:
		if b.ResultJSON != "" {
			b.ResultJSON, b.ResultOmitted = "", OmittedTooLarge
		}
	}
}

// MaxTextBytes bounds each text a request's sender chooses (its target, the
// capability it maps to, a denial's detail) in a receipt, so that a
// receipt fits in MaxBytes whatever was requested: longer ones are clipped
// by Clip. The request's payload_hash still names the whole request.
const MaxTextBytes = 8 << 10

// Clip is s, or, when it is longer than MaxTextBytes, its first bytes (whole
// UTF-8 sequences) and a note of its length.
func Clip(s string) string {
	if len(s) <= MaxTextBytes {
		return s
	}
	n := MaxTextBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…[clipped: " + strconv.Itoa(len(s)) + " bytes]"
}

// status maps the proxy's outcomes to execution statuses.
func status(outcome string) string {
	switch outcome {
	case "result":
		return StatusSuccess
	case "input required":
		return StatusInputRequired
	case "cancelled":
		return StatusCancelled
	case "unanswered":
		return StatusUnanswered
	}
	return StatusFailed
}
