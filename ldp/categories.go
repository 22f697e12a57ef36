package ldp

import "strings"

// The reference's failure categories, as this implementation uses them:
// who or what a TASK_FAILED (or SESSION_REJECT) is about.
const (
	// CategoryIdentity: the envelope is not for this delegate.
	CategoryIdentity = "identity"
	// CategoryCapability: this delegate does not offer what was asked
	// (no such skill, input it cannot take, a tool it cannot offer as
	// approved).
	CategoryCapability = "capability"
	// CategoryPolicy: the initiator's authority does not cover the task
	// (its token's capabilities, budget, rate, approval, expiry or
	// revocation, its contract's terms).
	CategoryPolicy = "policy"
	// CategorySecurity: the initiator's credentials do not hold (an
	// envelope's or request's signature, a token's form or signatures).
	CategorySecurity = "security"
	// CategorySession: the session or the task's place in it.
	CategorySession = "session"
	// CategoryRuntime: this delegate failed while doing the task (the
	// tool, a store, the audit log, its own checks).
	CategoryRuntime = "runtime"
	// CategoryQuality: the result was made and fails its verification.
	CategoryQuality = "quality"
)

// failureCategories maps every failure code a DelegateOS delegate sends to
// its category: the DelegateOS denial types (dct, gate) first, then this
// implementation's own codes. docs/ldp.md has the table.
var codeCategories = map[string]string{
	// DelegateOS denials: the token and the gate.
	"capability_not_granted": CategoryPolicy,
	"budget_exceeded":        CategoryPolicy,
	"rate_limited":           CategoryPolicy,
	"expired":                CategoryPolicy,
	"revoked":                CategoryPolicy,
	"dependency_pending":     CategoryPolicy,
	"approval_declined":      CategoryPolicy,
	"approval_unavailable":   CategoryPolicy,
	"malformed_token":        CategorySecurity,
	"invalid_signature":      CategorySecurity,
	"attenuation_violation":  CategorySecurity,
	"invalid_token":          CategorySecurity,
	"token_required":         CategorySecurity,
	"tool_not_pinned":        CategoryCapability,
	"store_unavailable":      CategoryRuntime,
	"store_reset":            CategoryRuntime,
	"evidence_unavailable":   CategoryRuntime,
	// This implementation's codes.
	CodeMisaddressed:           CategoryIdentity,
	CodeUnexpected:             CategorySession,
	CodeSkillUnknown:           CategoryCapability,
	CodeInputInvalid:           CategoryCapability,
	CodeFrameInvalid:           CategoryQuality,
	CodeTaskRunning:            CategorySession,
	CodeTaskUnknown:            CategorySession,
	CodeContract:               CategoryPolicy,
	CodeTaskFailed:             CategoryRuntime,
	CodeAttestationFailed:      CategoryRuntime,
	CodeBearerUnsigned:         CategorySecurity,
	"TASK_CANCELLED":           CategoryRuntime,
	"TOOL_ERROR":               CategoryRuntime,
	"VERIFICATION_FAILED":      CategoryQuality,
	"VERIFICATION_UNAVAILABLE": CategoryRuntime,
	CodeSessionUnknown:         CategorySession,
	CodeSessionExpired:         CategorySession,
	CodeSessionSuspended:       CategorySession,
	CodeSessionClosed:          CategorySession,
	CodeSessionState:           CategorySession,
	CodeSessionPeer:            CategorySession,
	CodeSessionsFull:           CategorySession,
	CodePayloadMode:            CategorySession,
	string(ReasonMalformed):    CategorySecurity,
	string(ReasonUnsigned):     CategorySecurity,
	string(ReasonAlgorithm):    CategorySecurity,
	string(ReasonWrongKey):     CategorySecurity,
	string(ReasonTampered):     CategorySecurity,
	string(ReasonStale):        CategorySecurity,
	string(ReasonReplayed):     CategorySecurity,
	string(ReasonBusy):         CategorySecurity,
}

// CodeCategory is the category of a failure code as a DelegateOS delegate
// sends it: a DelegateOS denial type, an AVP-Sig refusal (signature_…),
// JSON-RPC errors of the tool's call (jsonrpc_N, runtime), or a code of
// this implementation. ok is false for a code outside that table.
func CodeCategory(code string) (category string, ok bool) {
	if c, ok := codeCategories[code]; ok {
		return c, true
	}
	switch {
	case strings.HasPrefix(code, "signature_"):
		return CategorySecurity, true
	case strings.HasPrefix(code, "jsonrpc_"):
		return CategoryRuntime, true
	}
	return "", false
}

// DelegatesFailure reports whether a TASK_FAILED's error is the delegate's
// own failure, as an initiator reads it to rate the delegate. A delegate
// chooses the category it sends, so the category alone is not taken: a
// failure is a refusal (policy, security, session, …: not about the
// delegate's competence) only when its code is one CodeCategory knows and
// the category is that code's. A made-up code, or a category that does
// not match its code, is the delegate's failure whatever it is called, so
// that a delegate cannot hide its failures as refusals. A semantic frame
// refused as invalid (SEMANTIC_FRAME_INVALID, or PAYLOAD_MODE, as the
// spec's flow and the reference send it, category quality or session) is
// the initiator's input, answered by falling back (§4.3): not a failure.
func DelegatesFailure(e LdpError) bool {
	if (e.Code == CodeFrameInvalid || e.Code == CodePayloadMode) && (e.Category == CategoryQuality || e.Category == CategorySession) {
		return false
	}
	c, ok := CodeCategory(e.Code)
	if !ok || c != e.Category {
		return true
	}
	return c == CategoryRuntime || c == CategoryQuality
}
