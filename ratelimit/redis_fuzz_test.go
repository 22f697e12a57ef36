package ratelimit

import (
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/redisconn"
)

// FuzzRedisKey: two keys share a Redis key only when they are the same
// key, and the text Redis Cluster hashes (from the first "{" to the next
// "}") is the level's issuer tag, so a call's logs are on one shard.
func FuzzRedisKey(f *testing.F) {
	f.Add("tools:a", "b:c/1:d", "tools:a:b", "c/1:d")
	f.Add("policy", "ISS{x}/9:del_a", "policy", "ISSx/9:del_a")
	f.Add("p", "1:p:1", "1:p", "1")
	f.Add("", "", "}", "{")
	lim := Limit{N: 10, Per: time.Minute}
	f.Fuzz(func(t *testing.T, l1, v1, l2, v2 string) {
		a, b := Key{l1, v1}, Key{l2, v2}
		if (redisKey(a, lim) == redisKey(b, lim)) != (a == b) {
			t.Fatalf("%q and %q: keys %q and %q", a, b, redisKey(a, lim), redisKey(b, lim))
		}
		for _, k := range []Key{a, b} {
			got := redisKey(k, lim)
			_, rest, _ := strings.Cut(got, "{")
			tag, _, ok := strings.Cut(rest, "}")
			if !ok || !strings.HasPrefix(got, rateKeyPrefix+"{") || tag != redisconn.HashTag(k.Level) {
				t.Fatalf("%q: key %q hashes %q, want %q", k, got, tag, redisconn.HashTag(k.Level))
			}
		}
	})
}
