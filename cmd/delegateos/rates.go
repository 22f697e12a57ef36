package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/sqlitedb"
	"github.com/delegateos/delegateos/policy"
)

// writeRates writes the policy's rate limits for policy check, and where
// their windows are kept; nothing when it sets none.
func writeRates(w io.Writer, p *policy.Policy) {
	if len(gate.RateLimits(p)) == 0 {
		return
	}
	if !p.Rate.IsZero() {
		fmt.Fprintf(w, "rate limit:\t%s for every request, per delegation and its sub-delegations\n", p.Rate)
	}
	where := "in memory only (set spend_store to keep them across restarts)"
	if p.SpendStore != "" {
		where = p.SpendStore + gate.RateFileSuffix
		if shared, err := sqlitedb.IsDB(p.SpendStore); shared || errors.Is(err, fs.ErrNotExist) {
			where = "in the spend store's database " + p.SpendStore + ", shared by every proxy on this machine"
		}
	}
	if redisconn.IsURL(p.SpendStore) {
		where = "in Redis, shared by every proxy on " + redisconn.Redact(p.SpendStore)
	}
	fmt.Fprintf(w, "rate-limit windows:\t%s\n", where)
}
