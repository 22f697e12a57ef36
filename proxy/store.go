package proxy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/redisconn"
)

// StoreUnavailable is the denial type of a call refused because a shared
// store it needs (a spend store, revocation list or ended-delegation set
// in Redis) did not answer in time: the gate never decides on what it
// could not read.
const StoreUnavailable dct.DenialType = "store_unavailable"

// StoreReset is the denial type of a call refused because its shared
// store has lost data it held (flushed, restarted without persistence,
// keys deleted or evicted): deciding on what is left would spend a
// budget again. Calls are refused until an operator rebuilds the store
// from the fleet's audit logs (delegateos store recover) or accepts the
// loss (delegateos store init --reset).
const StoreReset dct.DenialType = "store_reset"

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
