//go:build redteam

package ldp

import (
	"fmt"
	"testing"
	"time"
)

// The red team's attacks on LDP (issue 21) that broke the package: each
// test fails until its finding is fixed (go test -tags redteam).

// TestRedteamSessionTokensForgotten: the SESSION_PROPOSE's token (up to
// 64 KiB) is kept per session until SESSION_CLOSE, never when a session
// expires or is swept: a holder that opens sessions with ttl_secs 1 and
// never closes them grows the delegate's memory without bound, past the
// session table's own bound.
func TestRedteamSessionTokensForgotten(t *testing.T) {
	now := time.Now()
	clk := func() time.Time { return now }
	d := newDelegate(t, 1, "")
	d.resp.Now = clk
	d.resp.Sessions = &Sessions{Now: clk, Max: 2}
	d.resp.Verifier.Now = clk
	c := newClient(2)
	c.Now, c.Verifier.Now = clk, clk
	for i := range 20 {
		if _, err := c.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{TTLSecs: ptr(uint64(1))},
			&DelegateOSMember{DCT: fmt.Sprintf("token-%d", i)}, "", ""); err != nil {
			t.Fatal(err)
		}
		now = now.Add(2 * time.Second)
	}
	d.resp.mu.Lock()
	n := len(d.resp.tokens)
	d.resp.mu.Unlock()
	if n > 2 {
		t.Fatalf("the delegate holds %d sessions' tokens; the table holds at most 2 sessions", n)
	}
}
