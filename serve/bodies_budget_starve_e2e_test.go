package serve_test

import (
	"fmt"
	"io"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// Red team (issue 26 item 3, bullet 1): one credential holds the whole
// --max-body-bytes-in-flight budget and starves every other client. Alice
// (a valid token, her own session) sends the headers of POSTs whose bodies
// she never sends: one declaring --max-body-bytes, and one chunked with no
// Content-Length (charged the full limit before a byte arrives). Each holds
// its share for --read-timeout (10 s), and she can send them again for
// ever. Bob, another credential with a 200-byte call, must still be served;
// today he gets 503 (the budget has no per-credential share, only the
// anonymous one).
// (Was TestRedteamOneCredentialStarvesBodyBudget.)
func TestServeBodyBudgetNotStarvedByOneCredential(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			e := mcptest.NewEnv(t)
			srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--max-body-bytes", "1048576", "--max-body-bytes-in-flight", "1048576"}})
			alice := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
			bob := mcptest.Bearer(e.Mint(nil, "mcp:*:*"))
			asid := srv.Initialize(alice)
			bsid := srv.Initialize(bob)
			hdr := map[string]string{"Mcp-Session-Id": asid}
			for k, v := range alice {
				hdr[k] = v
			}
			if chunked {
				held := dial(t, srv.Addr)
				t.Cleanup(func() { held.Close() })
				var b string
				b = fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n", srv.Addr)
				for k, v := range hdr {
					b += k + ": " + v + "\r\n"
				}
				b += "\r\n"
				if _, err := io.WriteString(held, b); err != nil {
					t.Fatal(err)
				}
			} else {
				postHeaders(t, srv.Addr, hdr, 1<<20)
			}
			// Bob's small calls, while Alice holds her bodies' share.
			for i := 0; i < 3; i++ {
				if r := srv.Post(bsid, bob, echoCall(fmt.Sprint(i+10), 200)); r.Status != 200 {
					t.Fatalf("call %d of another credential while one token holds the budget with unsent bodies: HTTP %d %s", i, r.Status, r.Body)
				}
			}
		})
	}
}
