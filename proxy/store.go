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

// endedDenial is the denial of a call under delegation id, which
// Delegations.Ended reports with status.
func endedDenial(id, status string) (dct.DenialType, string) {
	if rest, ok := strings.CutPrefix(status, unavailableStatus+": "); ok {
		return StoreUnavailable, fmt.Sprintf("whether delegation %s has ended cannot be read: %s; the call is refused rather than decided on data that may be stale", id, rest)
	}
	return dct.Expired, fmt.Sprintf("delegation %s has ended (%s): its token no longer authorizes calls", id, status)
}
