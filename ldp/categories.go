package ldp

import (
	"fmt"
	"strings"
)

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
	// AVP-Sig's refusals (avpsig.Reason, listed exactly: a made-up
	// signature_* code is the delegate's failure). signature_wrong_key and
	// signature_invalid are the envelope's reasons too.
	"signature_missing":           CategorySecurity,
	"signature_malformed":         CategorySecurity,
	"signature_stale":             CategorySecurity,
	"signature_body_tampered":     CategorySecurity,
	"signature_query_tampered":    CategorySecurity,
	"signature_replayed":          CategorySecurity,
	"signature_busy":              CategorySecurity,
	"signature_store_unavailable": CategoryRuntime,
}

// CodeCategory is the category of a failure code as a DelegateOS delegate
// sends it: a DelegateOS denial type, an AVP-Sig refusal (its reasons,
// exactly), JSON-RPC errors of the tool's call (jsonrpc_N, runtime), or a
// code of this implementation. ok is false for a code outside that table.
func CodeCategory(code string) (category string, ok bool) {
	if c, ok := codeCategories[code]; ok {
		return c, true
	}
	if strings.HasPrefix(code, "jsonrpc_") {
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

// Exchange is what an initiator knows of the task it sent, against which
// it reads the delegate's refusal: a refusal the initiator can contradict
// is the delegate's failure, whatever its code and category.
type Exchange struct {
	// Card is the delegate's identity card the task was sent on.
	Card *IdentityCard
	// Skill is the skill the task asked for.
	Skill string
	// LiveSession: the task was sent in a session the delegate had just
	// accepted, which the initiator had not closed, with a new task ID.
	LiveSession bool
	// SignedFresh: the TASK_SUBMIT was signed with Ed25519 a moment
	// before, by the holder of the token it carried (in its delegateos
	// member), with a new message ID and nonce, and sent without a bearer.
	SignedFresh bool
	// Grants reports whether the token the task carried grants the
	// capability (NS:ACTION:RESOURCE, as a card states it); nil when the
	// initiator cannot tell.
	Grants func(capability string) bool
}

// envelopeRefusals are the refusals of an envelope's (or an AVP-Sig
// request's) signature, freshness and token placement, which a fresh
// Ed25519 envelope signed by the token's holder contradicts.
var envelopeRefusals = map[string]bool{
	string(ReasonMalformed): true, string(ReasonUnsigned): true, string(ReasonAlgorithm): true,
	string(ReasonWrongKey): true, string(ReasonTampered): true, string(ReasonStale): true,
	string(ReasonReplayed): true, CodeBearerUnsigned: true, "token_required": true,
	"signature_missing": true, "signature_malformed": true, "signature_stale": true,
	"signature_body_tampered": true, "signature_query_tampered": true, "signature_replayed": true,
}

// Contradicts says why the initiator knows the refusal e to be false ("" when
// it cannot tell): a SKILL_UNKNOWN for a skill the card lists; a session
// refusal in the live session the task was sent in; a refusal of the
// envelope's signature, freshness or token placement for a fresh envelope
// signed by the token's holder; capability_not_granted when the token sent
// grants the capability the card states for the skill.
func (x *Exchange) Contradicts(e LdpError) string {
	if x == nil {
		return ""
	}
	cat, _ := CodeCategory(e.Code)
	switch {
	case e.Code == CodeSkillUnknown && x.Card != nil && x.Card.Capability(x.Skill) != nil:
		return fmt.Sprintf("the delegate's card lists skill %s", x.Skill)
	case cat == CategorySession && x.LiveSession:
		return "the task was sent in the session the delegate had just accepted"
	case envelopeRefusals[e.Code] && x.SignedFresh:
		return "the task was signed with ed25519 a moment before, by its token's holder"
	case e.Code == "capability_not_granted" && x.Card != nil && x.Grants != nil:
		if c := x.Card.Metadata[MetaCapabilityPrefix+x.Skill]; c != "" && x.Grants(c) {
			return fmt.Sprintf("the token sent grants %s, the capability the delegate's card states for skill %s", c, x.Skill)
		}
	}
	return ""
}

// DelegatesFailureIn is DelegatesFailure read against the exchange: a
// refusal the initiator can contradict (Exchange.Contradicts) is the
// delegate's failure too; why says so ("" otherwise).
func DelegatesFailureIn(e LdpError, x *Exchange) (failed bool, why string) {
	if DelegatesFailure(e) {
		return true, ""
	}
	if (e.Code == CodeFrameInvalid || e.Code == CodePayloadMode) && (e.Category == CategoryQuality || e.Category == CategorySession) {
		return false, ""
	}
	if why := x.Contradicts(e); why != "" {
		return true, why
	}
	return false, ""
}
