package policy

import (
	"strings"
	"testing"
)

// A store may be a redis:// or rediss:// URL, kept as written; a path is
// resolved against the policy's directory as before.
func TestStoreURLs(t *testing.T) {
	p := mustParse(t, "spend_store: redis://10.0.0.5:6379/2\nrevocation_list: rediss://:pw@r.example:6380/0\nended_delegations: redis://10.0.0.5:6379/2\n")
	if p.SpendStore != "redis://10.0.0.5:6379/2" || p.RevocationList != "rediss://:pw@r.example:6380/0" || p.EndedDelegations != "redis://10.0.0.5:6379/2" {
		t.Fatalf("stores = %q, %q, %q", p.SpendStore, p.RevocationList, p.EndedDelegations)
	}
	if p := mustParse(t, "spend_store: spend.log\n"); p.SpendStore != "/etc/dos/spend.log" {
		t.Fatalf("a path: %q", p.SpendStore)
	}
	for _, src := range []string{
		"ended_delegations: /var/ended\n",
		"ended_delegations: http://x:1/\n",
		"spend_store: redis://\n",
	} {
		_, err := Parse([]byte(src), "/etc/dos")
		if err == nil || !strings.Contains(err.Error(), "redis:// or rediss:// URL") {
			t.Errorf("%q: %v, want refused", src, err)
		}
	}
}

// The Redis a fleet keeps signature nonces in: the spend store's, else the
// revocation list's, else none (memory).
func TestNonceStore(t *testing.T) {
	for _, c := range []struct{ spend, revs, want string }{
		{"redis://a:1/0", "redis://b:1/0", "redis://a:1/0"},
		{"rediss://a:1/0", "", "rediss://a:1/0"},
		{"/var/spend.log", "redis://b:1/0", "redis://b:1/0"},
		{"", "rediss://b:1/0", "rediss://b:1/0"},
		{"/var/spend.log", "/var/revocations.json", ""},
		{"", "", ""},
	} {
		if got := (&Policy{SpendStore: c.spend, RevocationList: c.revs}).NonceStore(); got != c.want {
			t.Errorf("spend store %q, revocation list %q: %q, want %q", c.spend, c.revs, got, c.want)
		}
	}
}
