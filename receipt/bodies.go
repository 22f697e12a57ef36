package receipt

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/delegateos/delegateos/internal/timestamp"
)

// Capability is the capability a request needs.
type Capability struct {
	Namespace string `json:"namespace"`
	Action    string `json:"action"`
	Resource  string `json:"resource"`
}

// Decision values (AVP's).
const (
	DecisionAllow   = "ALLOW"
	DecisionBlock   = "BLOCK"
	DecisionWaiting = "WAITING_FOR_HUMAN_APPROVAL"
)

// EnvironmentUnknown is the AVP environment the proxy reports: it cannot
// tell production from staging.
const EnvironmentUnknown = "unknown"

// DecisionBody is a decision_receipt/2: AVP's members (audit_id through
// policy_context_hash, approval_id) and the proxy's own.
type DecisionBody struct {
	SchemaVersion string `json:"schema_version"`
	// AuditID is urn:uuid:..., unique per decision.
	AuditID string `json:"audit_id"`
	// AgentDID is the token holder's did:key; absent when no token was
	// verified.
	AgentDID string `json:"agent_did,omitempty"`
	// Action is "mcp." and the method with dots, e.g. mcp.tools.call.
	Action string `json:"action"`
	// Resource is the request's target: the tool, the prompt, the URI (a
	// subscriptions/listen's URIs joined by spaces).
	Resource    string `json:"resource"`
	Environment string `json:"environment"`
	Decision    string `json:"decision"`
	// Reason is "allowed", "allowed_unauthenticated", or the denial type.
	Reason string `json:"reason"`
	// PayloadHash is "sha256:" and the hex SHA-256 of the request as the
	// client sent it (the whole JSON-RPC message).
	PayloadHash string `json:"payload_hash"`
	// PolicyContextHash is the hex SHA-256 of the policy file.
	PolicyContextHash string `json:"policy_context_hash"`

	Method string `json:"method"`
	// Capability is the capability the request needs; absent when the
	// target maps to none.
	Capability *Capability `json:"capability,omitempty"`
	// Chain is the token's block IDs (revocation IDs), authority first.
	Chain []string `json:"chain,omitempty"`
	// DelegationPath is the delegation ID of each block, authority first.
	DelegationPath []string `json:"delegation_path,omitempty"`
	ContractID     string   `json:"contract_id,omitempty"`
	DenialType     string   `json:"denial_type,omitempty"`
	DenialDetail   string   `json:"denial_detail,omitempty"`
	// CostReserved is what the gate reserved, in microcents.
	CostReserved int64 `json:"cost_reserved"`
	// Enforced is false when observe mode forwarded a refused request.
	Enforced  bool   `json:"enforced"`
	DecidedAt string `json:"decided_at"`
	// ArgumentsHash is "sha256:" and the hex SHA-256 of params.arguments
	// as sent (of a completion/complete's or a vendor method's whole
	// params, _delegateos cut out); absent when the request has none.
	ArgumentsHash string `json:"arguments_hash,omitempty"`
	// ArgumentsJSON is params.arguments in clear, exactly the JSON text
	// forwarded, only when the policy's receipts.include_arguments asks for
	// them; ArgumentsOmitted says why they were asked for and are not
	// there (an Omitted value).
	ArgumentsJSON    string `json:"arguments_json,omitempty"`
	ArgumentsOmitted string `json:"arguments_omitted,omitempty"`
	// Arguments are params.arguments canonicalized (RFC 8785), as versions
	// before receipts 2 wrote them: canonicalizing rounded numbers and
	// could fail. Still read from older logs; no longer written.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// ApprovalID and ApprovalReceiptHash link a decision made on a
	// human's approval to its human_approval_receipt/2.
	ApprovalID          string `json:"approval_id,omitempty"`
	ApprovalReceiptHash string `json:"approval_receipt_hash,omitempty"`
	Position
	Proof *Proof `json:"proof,omitempty"`
}

func (b *DecisionBody) kind() string        { return KindDecision }
func (b *DecisionBody) position() *Position { return &b.Position }
func (b *DecisionBody) proof() **Proof      { return &b.Proof }

// Execution statuses.
const (
	StatusSuccess       = "SUCCESS"
	StatusFailed        = "FAILED"
	StatusInputRequired = "INPUT_REQUIRED"
	StatusCancelled     = "CANCELLED"
	StatusUnanswered    = "UNANSWERED"
)

// Evaluator versions the proxy writes.
const (
	ExecutionEvaluator = "delegateos-proxy/1"
	ApprovalEvaluator  = "delegateos-human-control/1"
)

// ExecutionBody is an execution_receipt/2.
type ExecutionBody struct {
	SchemaVersion string `json:"schema_version"`
	ReceiptID     string `json:"receipt_id"`
	// GateAuditID is the decision's audit_id.
	GateAuditID string `json:"gate_audit_id"`
	AgentDID    string `json:"agent_did,omitempty"`
	Action      string `json:"action"`
	Resource    string `json:"resource"`
	Environment string `json:"environment"`
	Status      string `json:"status"`
	// Adapter is "mcp-stdio"; Operation the request's method.
	Adapter   string `json:"adapter"`
	Operation string `json:"operation"`
	// ParamsHash is the decision's arguments_hash, when it has one.
	ParamsHash string `json:"params_hash,omitempty"`
	// RequestHash is "sha256:" and the hex SHA-256 of the request as
	// forwarded upstream (the proxy's id, no _delegateos).
	RequestHash string `json:"request_hash"`
	// ResponseHash is "sha256:" and the hex SHA-256 of the response as
	// returned to the client; absent when none was (cancelled,
	// unanswered, too large, unreadable).
	ResponseHash string `json:"response_hash,omitempty"`
	// DecisionReceiptHash is the digest of the decision receipt.
	DecisionReceiptHash string `json:"decision_receipt_hash"`
	StartedAt           string `json:"started_at"`
	CompletedAt         string `json:"completed_at"`
	DurationMicros      int64  `json:"duration_us"`
	// CostCommitted is what the call was charged, in microcents.
	CostCommitted int64 `json:"cost_committed"`
	// Outcome is the proxy's outcome: result, error, input required,
	// too large, unreadable, cancelled or unanswered.
	Outcome          string `json:"outcome"`
	EvaluatorVersion string `json:"evaluator_version"`
	// ResultJSON is the response's result in clear, exactly the JSON text
	// returned to the client, only when the policy's
	// receipts.include_results asks for it; ResultOmitted says why it was
	// asked for and is not there (an Omitted value).
	ResultJSON    string `json:"result_json,omitempty"`
	ResultOmitted string `json:"result_omitted,omitempty"`
	// Result is the result canonicalized, as versions before receipts 2
	// wrote it; still read from older logs, no longer written.
	Result              json.RawMessage `json:"result,omitempty"`
	ApprovalReceiptHash string          `json:"approval_receipt_hash,omitempty"`
	Position
	Proof *Proof `json:"proof,omitempty"`
}

func (b *ExecutionBody) kind() string        { return KindExecution }
func (b *ExecutionBody) position() *Position { return &b.Position }
func (b *ExecutionBody) proof() **Proof      { return &b.Proof }

// Why arguments or a result the policy puts into receipts are not in one
// (arguments_omitted, result_omitted).
const (
	// OmittedTooLarge: with them the receipt would exceed MaxBytes.
	OmittedTooLarge = "too_large"
	// OmittedInvalidUTF8: the bytes are not UTF-8, so no JSON string holds
	// them exactly.
	OmittedInvalidUTF8 = "invalid_utf8"
)

// Human approval decisions.
const (
	ApprovalApproved    = "APPROVED"
	ApprovalDeclined    = "DECLINED"
	ApprovalCancelled   = "CANCELLED"
	ApprovalTimeout     = "TIMEOUT"
	ApprovalUnavailable = "UNAVAILABLE"
)

// HumanApprovalBody is a human_approval_receipt/2.
type HumanApprovalBody struct {
	SchemaVersion     string `json:"schema_version"`
	ApprovalID        string `json:"approval_id"`
	GateAuditID       string `json:"gate_audit_id"`
	RequesterAgentDID string `json:"requester_agent_did,omitempty"`
	PrincipalDID      string `json:"principal_did,omitempty"`
	Action            string `json:"action"`
	Resource          string `json:"resource"`
	Environment       string `json:"environment"`
	RiskClass         string `json:"risk_class"`
	GateReason        string `json:"gate_reason"`
	Decision          string `json:"decision"`
	Reason            string `json:"reason"`
	RequestedAt       string `json:"requested_at"`
	DecidedAt         string `json:"decided_at"`
	ExpiresAt         string `json:"expires_at,omitempty"`
	EvaluatorVersion  string `json:"evaluator_version"`
	// Cost is the call's cost as the user was shown it, in microcents.
	Cost                  int64  `json:"cost"`
	DelegationReceiptID   string `json:"delegation_receipt_id,omitempty"`
	DelegationReceiptHash string `json:"delegation_receipt_hash,omitempty"`
	DecisionReceiptHash   string `json:"decision_receipt_hash,omitempty"`
	// AnsweredBy names the client that answered (its clientInfo,
	// "name/version"); AnswerAction is the answer's action (accept,
	// decline, cancel); AnswerHash is the hex SHA-256 of the answer's
	// result as the client wrote it. All are absent when no answer came.
	AnsweredBy   string `json:"answered_by,omitempty"`
	AnswerAction string `json:"answer_action,omitempty"`
	AnswerHash   string `json:"answer_hash,omitempty"`
	// RequestHash is "sha256:" and the hex SHA-256 of the request exactly
	// as it is forwarded if approved; absent when nobody was asked.
	RequestHash string `json:"request_hash,omitempty"`
	Position
	Proof *Proof `json:"proof,omitempty"`
}

func (b *HumanApprovalBody) kind() string        { return KindHumanApproval }
func (b *HumanApprovalBody) position() *Position { return &b.Position }
func (b *HumanApprovalBody) proof() **Proof      { return &b.Proof }

// CheckpointBody is an audit_checkpoint/2 (or, read from an older log, an
// audit_checkpoint/1, which has no "recovered"): the log's length and
// head as of this entry, signed.
type CheckpointBody struct {
	SchemaVersion string `json:"schema_version"`
	// Length is the number of entries before this one.
	Length int64 `json:"length"`
	// Head is the digest of entry Length (64 zeros when Length is 0).
	Head string `json:"head"`
	// Final is set on the checkpoint written when the proxy shuts down.
	Final bool `json:"final"`
	// Recovered is true on the checkpoint a proxy writes first when it
	// continues a log that did not end with a final checkpoint: entries
	// written before it may be missing from the log. It is present in
	// every audit_checkpoint/2 and absent from an audit_checkpoint/1.
	Recovered *bool  `json:"recovered,omitempty"`
	At        string `json:"at"`
	// Checkpoint, in an audit_checkpoint/3, is the C2SP tlog-checkpoint
	// signed note of the Merkle tree of the Length entries before this
	// one, signed by the same key (docs/receipts.md).
	Checkpoint string `json:"checkpoint,omitempty"`
	Position
	Proof *Proof `json:"proof,omitempty"`
}

// IsRecovered reports whether b is a recovery checkpoint.
func (b *CheckpointBody) IsRecovered() bool { return b.Recovered != nil && *b.Recovered }

func (b *CheckpointBody) kind() string        { return KindCheckpoint }
func (b *CheckpointBody) position() *Position { return &b.Position }
func (b *CheckpointBody) proof() **Proof      { return &b.Proof }

// SignHumanApproval fills b's schema_version, evaluator version and
// environment when unset, checks it, and signs it. Outside an audit log b's
// Position stays zero; the audit log's Append sets it instead.
func (s *Signer) SignHumanApproval(b *HumanApprovalBody) ([]byte, error) {
	FillHumanApproval(b)
	if err := checkBody(b); err != nil {
		return nil, fmt.Errorf("%s: %w", KindHumanApproval, err)
	}
	return s.Sign(b)
}

// CheckHumanApproval fills b's fixed members when they are unset and
// checks it as Parse would, before it is signed into an audit log.
func CheckHumanApproval(b *HumanApprovalBody) error {
	FillHumanApproval(b)
	if err := checkBody(b); err != nil {
		return fmt.Errorf("%s: %w", KindHumanApproval, err)
	}
	return nil
}

// FillHumanApproval sets b's fixed members when they are unset.
func FillHumanApproval(b *HumanApprovalBody) {
	b.SchemaVersion = KindHumanApproval
	if b.EvaluatorVersion == "" {
		b.EvaluatorVersion = ApprovalEvaluator
	}
	if b.Environment == "" {
		b.Environment = EnvironmentUnknown
	}
}

// checkBody checks the members Parse cannot check by shape alone.
func checkBody(b Body) error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	need := func(name, v string) {
		if v == "" {
			bad("%s is missing", name)
		}
	}
	hash := func(name, v string, prefixed, required bool) {
		if v == "" {
			if required {
				bad("%s is missing", name)
			}
			return
		}
		h := v
		if prefixed {
			var ok bool
			if h, ok = strings.CutPrefix(v, "sha256:"); !ok {
				bad("%s must be sha256: and 64 lower-case hex digits", name)
				return
			}
		}
		if !isHex64(h) {
			bad("%s must be %s64 lower-case hex digits", name, map[bool]string{true: "sha256: and "}[prefixed])
		}
	}
	when := func(name, v string, required bool) {
		if v == "" {
			if required {
				bad("%s is missing", name)
			}
			return
		}
		if _, err := timestamp.Parse(v); err != nil {
			bad("%s: %v", name, err)
		}
	}
	urn := func(name, v string) {
		if !isUUIDURN(v) {
			bad("%s must be urn:uuid: and a lower-case UUID", name)
		}
	}
	oneOf := func(name, v string, allowed ...string) {
		for _, a := range allowed {
			if v == a {
				return
			}
		}
		bad("%s must be one of %s", name, strings.Join(allowed, ", "))
	}
	nonNegative := func(name string, v int64) {
		if v < 0 {
			bad("%s must not be negative", name)
		}
	}
	// clearMember checks a clear member (name_json), its omission reason and its
	// older canonicalized form: at most one is given.
	clearMember := func(name, text, omitted string, old json.RawMessage) {
		n := 0
		for _, given := range []bool{text != "", omitted != "", len(old) > 0} {
			if given {
				n++
			}
		}
		if n > 1 {
			bad("%s_json, %s_omitted and %s exclude each other", name, name, name)
		}
		if omitted != "" {
			oneOf(name+"_omitted", omitted, OmittedTooLarge, OmittedInvalidUTF8)
		}
	}
	switch b := b.(type) {
	case *DecisionBody:
		urn("audit_id", b.AuditID)
		need("action", b.Action)
		need("method", b.Method)
		need("environment", b.Environment)
		oneOf("decision", b.Decision, DecisionAllow, DecisionBlock, DecisionWaiting)
		need("reason", b.Reason)
		hash("payload_hash", b.PayloadHash, true, true)
		hash("policy_context_hash", b.PolicyContextHash, false, true)
		hash("arguments_hash", b.ArgumentsHash, true, false)
		hash("approval_receipt_hash", b.ApprovalReceiptHash, false, false)
		when("decided_at", b.DecidedAt, true)
		nonNegative("cost_reserved", b.CostReserved)
		clearMember("arguments", b.ArgumentsJSON, b.ArgumentsOmitted, b.Arguments)
		if (b.Decision == DecisionBlock) != (b.DenialType != "") {
			bad("denial_type must be given exactly when the decision is BLOCK")
		}
		if len(b.Chain) > 0 && len(b.Chain) != len(b.DelegationPath) {
			bad("chain and delegation_path must have one entry per block")
		}
		for _, s := range append(b.Chain[:len(b.Chain):len(b.Chain)], b.DelegationPath...) {
			if s == "" {
				bad("chain and delegation_path entries must not be empty")
				break
			}
		}
	case *ExecutionBody:
		urn("receipt_id", b.ReceiptID)
		urn("gate_audit_id", b.GateAuditID)
		need("action", b.Action)
		need("environment", b.Environment)
		oneOf("status", b.Status, StatusSuccess, StatusFailed, StatusInputRequired, StatusCancelled, StatusUnanswered)
		need("adapter", b.Adapter)
		need("operation", b.Operation)
		hash("params_hash", b.ParamsHash, true, false)
		hash("request_hash", b.RequestHash, true, true)
		hash("response_hash", b.ResponseHash, true, false)
		hash("decision_receipt_hash", b.DecisionReceiptHash, false, true)
		hash("approval_receipt_hash", b.ApprovalReceiptHash, false, false)
		when("started_at", b.StartedAt, true)
		when("completed_at", b.CompletedAt, true)
		nonNegative("duration_us", b.DurationMicros)
		nonNegative("cost_committed", b.CostCommitted)
		need("outcome", b.Outcome)
		need("evaluator_version", b.EvaluatorVersion)
		clearMember("result", b.ResultJSON, b.ResultOmitted, b.Result)
		if b.ResultJSON != "" && b.ResponseHash == "" {
			bad("result_json needs response_hash: it is part of the response returned")
		}
	case *HumanApprovalBody:
		need("approval_id", b.ApprovalID)
		urn("gate_audit_id", b.GateAuditID)
		need("action", b.Action)
		need("environment", b.Environment)
		need("risk_class", b.RiskClass)
		need("gate_reason", b.GateReason)
		oneOf("decision", b.Decision, ApprovalApproved, ApprovalDeclined, ApprovalCancelled, ApprovalTimeout, ApprovalUnavailable)
		need("reason", b.Reason)
		when("requested_at", b.RequestedAt, true)
		when("decided_at", b.DecidedAt, true)
		when("expires_at", b.ExpiresAt, false)
		need("evaluator_version", b.EvaluatorVersion)
		nonNegative("cost", b.Cost)
		hash("delegation_receipt_hash", b.DelegationReceiptHash, false, false)
		hash("decision_receipt_hash", b.DecisionReceiptHash, false, false)
		hash("answer_hash", b.AnswerHash, false, false)
		hash("request_hash", b.RequestHash, true, false)
	case *CheckpointBody:
		nonNegative("length", b.Length)
		hash("head", b.Head, false, true)
		when("at", b.At, true)
		if b.Seq == 0 {
			bad("a checkpoint must carry its audit_seq and audit_prev")
		} else if b.Length != b.Seq-1 || b.Head != b.Prev {
			bad("length and head must be the entries before this one (audit_seq − 1, audit_prev)")
		}
		switch {
		case b.SchemaVersion != KindCheckpointV1 && b.Recovered == nil:
			bad("recovered is required")
		case b.SchemaVersion == KindCheckpointV1 && b.Recovered != nil:
			bad("an %s has no recovered", KindCheckpointV1)
		case (b.SchemaVersion == KindCheckpoint) != (b.Checkpoint != ""):
			bad("an %s, and only it, has a checkpoint", KindCheckpoint)
		case b.IsRecovered() && b.Final:
			bad("a checkpoint is final or recovered, not both")
		case b.IsRecovered() && b.Length == 0:
			bad("a recovered checkpoint follows the entry it recovers from: its length cannot be 0")
		}
	}
	p := b.position()
	switch {
	case p.Seq < 0:
		bad("audit_seq must be positive")
	case p.Seq == 0 && p.Prev != "":
		bad("audit_prev needs audit_seq")
	case p.Seq > 0:
		hash("audit_prev", p.Prev, false, true)
		if p.Seq == 1 && p.Prev != GenesisPrev {
			bad("the first entry's audit_prev must be 64 zeros")
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// isUUIDURN: urn:uuid:xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, lower case.
func isUUIDURN(s string) bool {
	u, ok := strings.CutPrefix(s, "urn:uuid:")
	if !ok || len(u) != 36 {
		return false
	}
	for i := 0; i < len(u); i++ {
		c := u[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
			continue
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
