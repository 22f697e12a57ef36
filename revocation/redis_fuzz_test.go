package revocation

import (
	"encoding/json"
	"testing"
)

// FuzzRedisEntry: an entry read from Redis never panics the reader; one
// that reads is a verified entry stored under its own field, and reads
// the same written back.
func FuzzRedisEntry(f *testing.F) {
	k := testKey(f, 1)
	e := testEntry(f, k, testID("token"), ScopeChain)
	good, _ := json.Marshal(e)
	f.Add(redisField(e), string(good))
	f.Add(redisField(e), `{"revocationId":"x","revokedBy":"y","revokedAt":"z","scope":"chain","signature":"s"}`)
	f.Add("a b", `{"revocationId":"a","revocationid":"a"}`)
	f.Add("", " [] ")
	f.Fuzz(func(t *testing.T, field, value string) {
		got, err := parseRedisEntry(field, value)
		if err != nil {
			return
		}
		if got.Verify() != nil || redisField(got) != field {
			t.Fatalf("%q under %q read as %+v", value, field, got)
		}
		again, _ := json.Marshal(got)
		if back, err := parseRedisEntry(field, string(again)); err != nil || back != got {
			t.Fatalf("written back: %v, %+v", err, back)
		}
	})
}
