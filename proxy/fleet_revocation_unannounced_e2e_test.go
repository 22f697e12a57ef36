//go:build unix

package proxy_test

import (
	"context"
	"encoding/json"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// An entry that reaches the revocation list's hash without its
// announcement reaching the running proxies. Before: `delegateos revoke`
// run as a Redis ACL user that may write the hash but not publish on its
// channel (Redis 7's default for a new user, acl-pubsub-default
// resetchannels) left the entry written by its first, failed run (the
// script's HSETNX stays when its PUBLISH is refused), and its second run
// found the field, wrote nothing and succeeded; the running proxy was
// never told (it read the hash again only when it found it shorter than
// its copy), and forwarded all 5 of B's calls while a proxy started
// afterwards refused the token. Now the script announces before it
// writes, so the refused PUBLISH writes nothing and every run fails, and
// a proxy reads the list again whenever its length differs from its
// copy's, so an entry written by hand (or restored) reaches it too.
func TestE2EFleetRevocationUnannouncedReachesRunningProxies(t *testing.T) {
	f := newFleet(t, 1000*fleetCost, 1000*fleetCost, 1000*fleetCost)
	ctx := context.Background()
	rc := f.srv.Client()
	if err := rc.Do(ctx, "ACL", "SETUSER", "revoker", "on", ">pw", "~*", "+@all", "resetchannels").Err(); err != nil {
		t.Fatal(err)
	}
	_, old := f.start(f.b, "", nil)
	old.Call(t, "echo", map[string]any{"text": "before"}).OK(t, "B's call before the revoke")
	u, _ := url.Parse(f.url)
	u.User = url.UserPassword("revoker", "pw")
	for run := 1; run <= 2; run++ {
		out, err := f.revokeB(u.String())
		if err == nil || !strings.Contains(string(out), "publish") {
			t.Fatalf("revoke run %d as a user that may not publish: %v\n%s", run, err, out)
		}
		if n, err := rc.HLen(ctx, revocationsHash).Result(); err != nil || n != 0 {
			t.Fatalf("after revoke run %d was refused: %d entries in Redis (%v), want none", run, n, err)
		}
	}
	old.Call(t, "echo", map[string]any{"text": "not revoked"}).OK(t, "B's call: no revocation was written")
	// The entry written into the hash by hand, as a restore would: the
	// entry `revoke --json` signs into a list file.
	out, err := f.revokeB(filepath.Join(f.e.Dir, "list.json"), "--json")
	if err != nil {
		t.Fatalf("revoke into a file: %v\n%s", err, out)
	}
	var e struct{ RevocationID, RevokedBy string }
	if err := json.Unmarshal(out, &e); err != nil || e.RevocationID == "" {
		t.Fatalf("revoke --json printed %s (%v)", out, err)
	}
	if err := rc.HSet(ctx, revocationsHash, e.RevocationID+" "+e.RevokedBy, strings.TrimSpace(string(out))).Err(); err != nil {
		t.Fatal(err)
	}
	refusesB(t, old, "the running proxy, told of no entry")
	refusesToStart(t, f, f.b)
}
