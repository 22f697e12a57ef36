package ldp

import (
	"encoding/json"
)

// MessageType names a body (§3.2).
type MessageType string

// The message types of §3.2.
const (
	TypeHello              MessageType = "HELLO"
	TypeCapabilityManifest MessageType = "CAPABILITY_MANIFEST"
	TypeSessionPropose     MessageType = "SESSION_PROPOSE"
	TypeSessionAccept      MessageType = "SESSION_ACCEPT"
	TypeSessionReject      MessageType = "SESSION_REJECT"
	TypeTaskSubmit         MessageType = "TASK_SUBMIT"
	TypeTaskUpdate         MessageType = "TASK_UPDATE"
	TypeTaskResult         MessageType = "TASK_RESULT"
	TypeTaskFailed         MessageType = "TASK_FAILED"
	TypeTaskCancel         MessageType = "TASK_CANCEL"
	TypeAttestation        MessageType = "ATTESTATION"
	TypeSessionClose       MessageType = "SESSION_CLOSE"
)

// Signature algorithms (the envelope's signature_algorithm).
const (
	AlgHMACSHA256 = "hmac-sha256"
	AlgEd25519    = "ed25519"
)

// Envelope wraps every message (§3.1). Signature, SignatureAlgorithm and
// Nonce are the reference's optional members; Signer (the Ed25519
// profile's did:key) and DelegateOS are this project's.
type Envelope struct {
	MessageID   string
	SessionID   string
	From        string
	To          string
	Body        Body
	PayloadMode PayloadMode
	Timestamp   string
	Provenance  *Provenance

	Signature          string
	SignatureAlgorithm string
	Signer             string
	// Nonce is empty when absent (a present nonce is never empty).
	Nonce string
	// DelegateOS carries a delegation token with a SESSION_PROPOSE or
	// TASK_SUBMIT.
	DelegateOS *DelegateOSMember

	// raw is the envelope as received: the Ed25519 signature is checked
	// over it, never over a re-encoding.
	raw []byte
}

// DelegateOSMember is the envelope member that carries a DelegateOS token.
type DelegateOSMember struct {
	DCT    string `json:"dct"`
	Format string `json:"format,omitempty"`
}

// Body is the body of an envelope: one of the pointer types below.
type Body interface {
	Type() MessageType
	check() error
}

// Hello opens the handshake (§3.3).
type Hello struct {
	DelegateID     string        `json:"delegate_id"`
	SupportedModes []PayloadMode `json:"supported_modes"`
}

// CapabilityManifest answers HELLO. Its capabilities are free-form in the
// reference (an object in the spec's example flow, a list in the Python
// SDK), so they are kept as sent.
type CapabilityManifest struct {
	Capabilities json.RawMessage `json:"capabilities"`
}

// SessionPropose asks for a session.
type SessionPropose struct {
	Config SessionConfig `json:"config"`
}

// SessionConfig is §5.4's configuration, with the members the reference
// SDKs add: the initiator's own trust domain (trust_domain, both SDKs) and
// the mode the Rust SDK negotiated on its side (payload_mode).
type SessionConfig struct {
	PreferredPayloadModes []PayloadMode `json:"preferred_payload_modes,omitempty"`
	TTLSecs               *uint64       `json:"ttl_secs,omitempty"`
	RequiredTrustDomain   string        `json:"required_trust_domain,omitempty"`
	TrustDomain           string        `json:"trust_domain,omitempty"`
	PayloadMode           PayloadMode   `json:"payload_mode,omitempty"`
}

// SessionAccept accepts a session. FallbackChain is in the spec's §4.2
// flow, not in the reference's types.
type SessionAccept struct {
	SessionID      string        `json:"session_id"`
	NegotiatedMode PayloadMode   `json:"negotiated_mode"`
	FallbackChain  []PayloadMode `json:"fallback_chain,omitempty"`
}

// SessionReject refuses a session.
type SessionReject struct {
	Reason string    `json:"reason"`
	Error  *LdpError `json:"error,omitempty"`
}

// TaskSubmit submits a task.
type TaskSubmit struct {
	TaskID   string              `json:"task_id"`
	Skill    string              `json:"skill"`
	Input    json.RawMessage     `json:"input"`
	Contract *DelegationContract `json:"contract,omitempty"`
}

// TaskUpdate reports progress.
type TaskUpdate struct {
	TaskID   string   `json:"task_id"`
	Progress *float64 `json:"progress"`
	Message  *string  `json:"message"`
}

// TaskResult carries a task's output and its provenance (§6, required).
type TaskResult struct {
	TaskID     string          `json:"task_id"`
	Output     json.RawMessage `json:"output"`
	Provenance Provenance      `json:"provenance"`
}

// TaskFailed reports a failed task.
type TaskFailed struct {
	TaskID string   `json:"task_id"`
	Error  LdpError `json:"error"`
	// DelegateOS, from a DelegateOS delegate, names the receipts the gate
	// wrote for the task (its refusal's decision receipt, say).
	DelegateOS *ProvenanceDOS `json:"delegateos,omitempty"`
}

// TaskCancel cancels a task.
type TaskCancel struct {
	TaskID string `json:"task_id"`
}

// Attestation is a trust signal; claim and evidence are free-form.
type Attestation struct {
	Claim    json.RawMessage `json:"claim"`
	Evidence json.RawMessage `json:"evidence"`
}

// SessionClose ends a session.
type SessionClose struct {
	Reason *string `json:"reason"`
}

func (*Hello) Type() MessageType              { return TypeHello }
func (*CapabilityManifest) Type() MessageType { return TypeCapabilityManifest }
func (*SessionPropose) Type() MessageType     { return TypeSessionPropose }
func (*SessionAccept) Type() MessageType      { return TypeSessionAccept }
func (*SessionReject) Type() MessageType      { return TypeSessionReject }
func (*TaskSubmit) Type() MessageType         { return TypeTaskSubmit }
func (*TaskUpdate) Type() MessageType         { return TypeTaskUpdate }
func (*TaskResult) Type() MessageType         { return TypeTaskResult }
func (*TaskFailed) Type() MessageType         { return TypeTaskFailed }
func (*TaskCancel) Type() MessageType         { return TypeTaskCancel }
func (*Attestation) Type() MessageType        { return TypeAttestation }
func (*SessionClose) Type() MessageType       { return TypeSessionClose }

// newBody returns an empty body of type t, nil for an unknown type.
func newBody(t MessageType) Body {
	switch t {
	case TypeHello:
		return &Hello{}
	case TypeCapabilityManifest:
		return &CapabilityManifest{}
	case TypeSessionPropose:
		return &SessionPropose{}
	case TypeSessionAccept:
		return &SessionAccept{}
	case TypeSessionReject:
		return &SessionReject{}
	case TypeTaskSubmit:
		return &TaskSubmit{}
	case TypeTaskUpdate:
		return &TaskUpdate{}
	case TypeTaskResult:
		return &TaskResult{}
	case TypeTaskFailed:
		return &TaskFailed{}
	case TypeTaskCancel:
		return &TaskCancel{}
	case TypeAttestation:
		return &Attestation{}
	case TypeSessionClose:
		return &SessionClose{}
	}
	return nil
}

// TaskID returns the task a body is about, "" for a session-level body.
func TaskID(b Body) string {
	switch b := b.(type) {
	case *TaskSubmit:
		return b.TaskID
	case *TaskUpdate:
		return b.TaskID
	case *TaskResult:
		return b.TaskID
	case *TaskFailed:
		return b.TaskID
	case *TaskCancel:
		return b.TaskID
	}
	return ""
}

// LdpError is the reference's typed failure.
type LdpError struct {
	Code          string          `json:"code"`
	Category      string          `json:"category"`
	Message       string          `json:"message"`
	Severity      string          `json:"severity"`
	Retryable     bool            `json:"retryable"`
	PartialOutput json.RawMessage `json:"partial_output,omitempty"`
}

// The reference's failure categories and severities.
var (
	failureCategories = []string{"identity", "capability", "policy", "runtime", "quality", "session", "transport", "security"}
	severities        = []string{"warning", "error", "fatal"}
)

// DelegationContract is the reference's bounded expectations for a task.
type DelegationContract struct {
	ContractID      string         `json:"contract_id"`
	Objective       string         `json:"objective"`
	SuccessCriteria []string       `json:"success_criteria"`
	Policy          PolicyEnvelope `json:"policy"`
	Deadline        string         `json:"deadline,omitempty"`
	CreatedAt       string         `json:"created_at"`
}

// PolicyEnvelope is a contract's policy.
type PolicyEnvelope struct {
	FailurePolicy      string        `json:"failure_policy,omitempty"`
	Budget             *BudgetPolicy `json:"budget,omitempty"`
	SafetyConstraints  []string      `json:"safety_constraints,omitempty"`
	MaxDelegationDepth *uint32       `json:"max_delegation_depth,omitempty"`
}

// Failure policies.
const (
	FailClosed = "fail_closed"
	FailOpen   = "fail_open"
)

// BudgetPolicy is a contract's budget.
type BudgetPolicy struct {
	MaxTokens  *uint64  `json:"max_tokens,omitempty"`
	MaxCostUSD *float64 `json:"max_cost_usd,omitempty"`
}

// Provenance is §6's record, with the reference's later members and this
// project's DelegateOS member.
type Provenance struct {
	ProducedBy         string         `json:"produced_by"`
	ModelVersion       string         `json:"model_version"`
	PayloadModeUsed    PayloadMode    `json:"payload_mode_used"`
	Confidence         *float64       `json:"confidence,omitempty"`
	Verified           bool           `json:"verified"`
	SessionID          string         `json:"session_id,omitempty"`
	Timestamp          string         `json:"timestamp,omitempty"`
	TokensUsed         *uint64        `json:"tokens_used,omitempty"`
	CostUSD            *float64       `json:"cost_usd,omitempty"`
	ContractID         string         `json:"contract_id,omitempty"`
	ContractSatisfied  *bool          `json:"contract_satisfied,omitempty"`
	ContractViolations []string       `json:"contract_violations,omitempty"`
	VerificationStatus string         `json:"verification_status,omitempty"`
	Evidence           []EvidenceRef  `json:"evidence,omitempty"`
	Lineage            []LineageEntry `json:"lineage,omitempty"`
	DelegateOS         *ProvenanceDOS `json:"delegateos,omitempty"`
}

// Verification statuses of the reference.
var verificationStatuses = []string{"unverified", "self_verified", "peer_verified", "tool_verified", "human_verified"}

// EvidenceRef is the reference's supporting evidence.
type EvidenceRef struct {
	Source  string `json:"source"`
	Kind    string `json:"kind"`
	URI     string `json:"uri,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// LineageEntry is one hop of a delegation lineage.
type LineageEntry struct {
	DelegateID         string `json:"delegate_id"`
	ModelVersion       string `json:"model_version"`
	Step               string `json:"step"`
	Timestamp          string `json:"timestamp,omitempty"`
	VerificationStatus string `json:"verification_status,omitempty"`
}

// ProvenanceDOS is what a DelegateOS delegate adds to provenance: the
// attestation of the result, the cost the gate charged and the hashes of
// the receipts it wrote.
type ProvenanceDOS struct {
	// AttestationID names the delegate's signed TaskAttestation of the
	// result, which Attestation carries (TASK_RESULT only).
	AttestationID string          `json:"attestation_id,omitempty"`
	Attestation   json.RawMessage `json:"attestation,omitempty"`
	// CostChargedMicrocents is what the gate charged the task's
	// delegation, in microcents.
	CostChargedMicrocents *int64   `json:"cost_charged_microcents,omitempty"`
	ReceiptHashes         []string `json:"receipt_hashes,omitempty"`

	// verified is Attestation as last parsed and verified (see
	// verifiedAttestation): a check of the same bytes again reuses it.
	verified *verifiedAttestation
}
