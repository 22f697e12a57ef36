//go:build redteam

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// The red team's attacks on LDP (issue 21) that broke the product: each
// test fails until its finding is fixed (go test -tags redteam).

// TestLDPRedteamRouteSpoofedDID: a card is a claim of whoever serves it.
// A stranger serves a copy of a reputable delegate's card (its did:key,
// its ID) with a higher self-reported quality hint: ldp route gives it the
// reputable delegate's reputation, and the hint breaks the tie for it.
// The stranger cannot sign as that did:key (it never answers a HELLO).
func TestLDPRedteamRouteSpoofedDID(t *testing.T) {
	env := mcptest.NewEnv(t)
	honest := startLDPServe(t, env, "honest")
	card, err := (&ldp.Client{}).Discover(context.Background(), honest.Base)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	spoof := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		c := *card
		q := 1.0
		c.Capabilities = []ldp.Capability{{Name: "echo", QualityHint: &q}}
		b, _ := json.Marshal(&c)
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}))
	t.Cleanup(spoof.Close)
	ws := t.TempDir()
	observer := mcptest.NewKey(t, "observer").DID()
	for range 4 {
		if out, errs, code := mcptest.CLI(t, "reputation", "signal", "--workspace", ws, "--agent", card.Metadata[ldp.MetaDID], "--domain", "echo",
			"--score", "0.9", "--source", observer); code != 0 {
			t.Fatalf("signal: %s%s", out, errs)
		}
	}
	out, errs, code := mcptest.CLI(t, "ldp", "route", "--skill", "echo", "--trust-domain", "research", "--workspace", ws, honest.Base, spoof.URL)
	if code != 0 || !strings.HasPrefix(out, "→ "+honest.Base) {
		t.Fatalf("route chose the spoofer (exit %d):\n%s%s", code, out, errs)
	}
	_ = fmt.Sprint
}
