//go:build redteam

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
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

// TestLDPRedteamStrangerBodies: the MCP endpoint holds a body with no
// credential to 64 KiB and every body to a share of
// --max-body-bytes-in-flight, refused 413 or 503 unread; the LDP
// endpoints read any stranger's body up to 1 MiB outside that budget
// (ldp.Handler's own io.ReadAll), so a stranger's connections each hold
// up to 1 MiB of the server's memory. Here a stranger declares a body
// of 1 MiB (over the anonymous share of a 2 MiB budget) and sends none:
// it should be refused at once; it is read until the read timeout.
func TestLDPRedteamStrangerBodies(t *testing.T) {
	env := mcptest.NewEnv(t)
	pol := env.Policy(mcptest.Priced("echo", 100))
	pol.Extra = serveLDPSection
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "server")),
		"--max-body-bytes", "1048576", "--max-body-bytes-in-flight", "2097152", "--read-timeout", "2s"}})
	conn, err := net.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", ldp.MessagesPath, srv.Addr, ldp.MaxEnvelopeSize)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusRequestEntityTooLarge && res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a stranger's 1 MiB body was taken for reading (HTTP %d after the read timeout), outside the body budget", res.StatusCode)
	}
}
