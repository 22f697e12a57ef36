package gate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/render"
)

// Denial is a refused call, rendered as DelegateOS §11.2's JSON-RPC error.
type Denial struct {
	Type      dct.DenialType   `json:"type"`
	Detail    string           `json:"detail,omitempty"`
	Requested *dct.Capability  `json:"requested,omitempty"`
	Granted   []dct.Capability `json:"granted,omitempty"`
	// RetryAfterMs is, for RateLimited, how many milliseconds until the
	// same request would be admitted.
	RetryAfterMs int64 `json:"retryAfterMs,omitempty"`
}

// Message is the JSON-RPC error message for the denial: §11.2's "DCT
// verification failed", the denial type and what went wrong, because MCP
// clients show a person the message and drop the data.
func (d *Denial) Message() string {
	return DenialMessage + ": " + string(d.Type) + " — " + render.Escaped(d.Detail)
}

// DenialCode and DenialMessage are the JSON-RPC error of §11.2; the
// message sent starts with DenialMessage (see Denial.Message).
const (
	DenialCode    = -32001
	DenialMessage = "DCT verification failed"
)

// The denial types the gate and the fronts add to those of dct (§10.1).
const (
	// RateLimited is the denial type of a request refused because it would
	// pass a rate limit of the policy; the denial's RetryAfterMs says when the
	// same request would be admitted.
	RateLimited dct.DenialType = "rate_limited"

	// StoreUnavailable is the denial type of a call refused because a shared
	// store it needs (a spend store, revocation list or ended-delegation set
	// in Redis) did not answer in time: the gate never decides on what it
	// could not read.
	StoreUnavailable dct.DenialType = "store_unavailable"

	// StoreReset is the denial type of a call refused because its shared
	// store has lost data it held (flushed, restarted without persistence,
	// keys deleted or evicted): deciding on what is left would spend a
	// budget again. Calls are refused until an operator rebuilds the store
	// from the fleet's audit logs (delegateos store recover) or accepts the
	// loss (delegateos store init --reset).
	StoreReset dct.DenialType = "store_reset"

	// ToolNotPinned is the denial of a request whose tool or prompt is not
	// listed by the upstream as the policy's pins (tool_pins) approved it: its
	// definition changed, it has no pin (it is new, or renamed), or the
	// upstream does not list it at all.
	ToolNotPinned dct.DenialType = "tool_not_pinned"

	// DependencyPending is the denial of a call under a sub-task of a
	// decomposition plan before every sub-task it depends on has a verified
	// completion (or when the plan naming it cannot be trusted).
	DependencyPending dct.DenialType = "dependency_pending"

	// EvidenceUnavailable is the denial of a request made once the audit log
	// cannot be written.
	EvidenceUnavailable dct.DenialType = "evidence_unavailable"

	// ApprovalDeclined: the person asked did not approve the call — they
	// declined or cancelled, accepted the form without approving, or did
	// not answer in time.
	ApprovalDeclined dct.DenialType = "approval_declined"
	// ApprovalUnavailable: nobody could be asked — the client does not
	// support form elicitation, answered the request with an error, or the
	// session ended first.
	ApprovalUnavailable dct.DenialType = "approval_unavailable"
)

// unavailableStatus begins the status Delegations.Ended gives a
// delegation whose status could not be read from a shared store.
const unavailableStatus = "store unavailable"

// storeDenial returns the denial of a call whose store err could not
// answer, or nil when err is another error.
func storeDenial(err error, requested *dct.Capability, granted []dct.Capability) *Denial {
	if !errors.Is(err, redisconn.ErrUnavailable) {
		return nil
	}
	var u *redisconn.UnavailableError
	detail := err.Error()
	if errors.As(err, &u) {
		detail = u.Error()
	}
	return &Denial{Type: StoreUnavailable, Detail: detail + "; the call is refused rather than decided on data that may be stale", Requested: requested, Granted: granted}
}

// storeFailure returns the denial of a call whose store failed with err:
// store_reset when the store lost data, else store_unavailable, whatever
// the error (Redis out of memory, a reply no script makes, a field that
// is not a number): a store that cannot record the call never refuses it
// as budget_exceeded, which a client reads as the budget spent.
func storeFailure(err error, requested *dct.Capability, granted []dct.Capability) *Denial {
	if errors.Is(err, redisconn.ErrReset) {
		return &Denial{Type: StoreReset, Detail: err.Error(), Requested: requested, Granted: granted}
	}
	if den := storeDenial(err, requested, granted); den != nil {
		return den
	}
	return &Denial{Type: StoreUnavailable, Detail: err.Error() + "; the call is refused rather than decided without its spend recorded", Requested: requested, Granted: granted}
}

// endedDenial is the denial of a call under delegation id, which
// Delegations.Ended reports with status.
func endedDenial(id, status string) (dct.DenialType, string) {
	if rest, ok := strings.CutPrefix(status, unavailableStatus+": "); ok {
		return StoreUnavailable, fmt.Sprintf("whether delegation %s has ended cannot be read: %s; the call is refused rather than decided on data that may be stale", id, rest)
	}
	return dct.Expired, fmt.Sprintf("delegation %s has ended (%s): its token no longer authorizes calls", id, status)
}
