package gate

import (
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/internal/sqlitedb"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/ratelimit"
)

// RateFileSuffix names the rate-limit file after the spend store it sits
// next to: the proxy's state is kept in one place.
const RateFileSuffix = ".rates"

// openRates opens what keeps the policy's rate-limit windows: a file next
// to the spend store, so that a client that starts the proxy again (an MCP
// client starts one a session) finds them as they were, or, when the spend
// store is in Redis, the same Redis, so that every proxy of a fleet counts
// every call. Without a spend store, or without rate limits, it returns
// nil: the gate keeps the windows in memory. close closes the file or the
// connections.
func openRates(pol *policy.Policy, spendFrom string, log *zap.Logger) (limiter ratelimit.Store, close func(), err error) {
	limits := RateLimits(pol)
	if len(limits) == 0 {
		return nil, func() {}, nil
	}
	if pol.SpendStore == "" {
		log.Warn("rate-limit windows are kept in memory only and start afresh when the proxy restarts; set spend_store in the policy or --spend-store to keep them next to the spend")
		return nil, func() {}, nil
	}
	if redisconn.IsURL(pol.SpendStore) {
		r, err := ratelimit.OpenRedis(pol.SpendStore, limits)
		if err != nil {
			return nil, nil, storef("the rate-limit windows, kept in the spend store's Redis, cannot be used: %v; start Redis there or fix the URL (%s)", err, spendFrom)
		}
		return r, func() { r.Close() }, nil
	}
	path := pol.SpendStore + RateFileSuffix
	if shared, _ := sqlitedb.IsDB(pol.SpendStore); shared {
		s, err := ratelimit.OpenSQLite(pol.SpendStore, limits, 0)
		if err != nil {
			return nil, nil, storef("the rate-limit windows, kept in the spend store's database, cannot be used: %v (%s)", err, spendFrom)
		}
		// The windows an earlier version kept next to the spend log.
		if n, err := s.Import(path, time.Now()); err != nil {
			s.Close()
			return nil, nil, storef("the rate-limit file %s of an earlier version cannot be moved into the spend store's database: %v; stop the proxies still using it, or remove it to start every window afresh", path, err)
		} else if n > 0 {
			log.Info("the rate-limit windows of an earlier version were moved into the spend store's database", zap.String("from", path), zap.Int("admissions", n))
		}
		return s, func() { s.Close() }, nil
	}
	l, err := ratelimit.OpenFile(path, limits, time.Now())
	if err != nil {
		return nil, nil, storef("the rate-limit file %s, kept next to the spend store, cannot be opened: %v; give a spend store in a directory the proxy can write (%s)", path, err, spendFrom)
	}
	return l, func() {
		if err := l.Close(); err != nil {
			log.Warn("the rate-limit file could not be rewritten", zap.Error(err))
		}
	}, nil
}

// RatesPath is the rate-limit file a proxy with this policy keeps, or ""
// when it keeps none.
func RatesPath(pol *policy.Policy) string {
	if pol.SpendStore == "" || redisconn.IsURL(pol.SpendStore) || len(RateLimits(pol)) == 0 {
		return ""
	}
	// A database keeps them in itself, but a file of an earlier version
	// next to it is read into it.
	if shared, _ := sqlitedb.IsDB(pol.SpendStore); shared {
		if _, err := os.Lstat(pol.SpendStore + RateFileSuffix); err != nil {
			return ""
		}
	}
	return pol.SpendStore + RateFileSuffix
}
