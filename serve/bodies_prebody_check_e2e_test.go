package serve_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// Red team (issue 26 item 3, bullet 1), held: requests without a
// credential are answered from their headers, their bodies unread, however
// the body is framed: Expect: 100-continue (no "100 Continue" is sent),
// chunked with no Content-Length, and a GET or DELETE with a body naming
// an unknown session.
// (Was TestRedteamPreBodyCheckFramings.)
func TestServeRefusesUnauthenticatedBodiesUnreadAnyFraming(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy()})
	cases := []struct {
		name, method, extra string
		want                int
	}{
		{"expect-100-continue", "POST", "Content-Length: 16000000\r\nExpect: 100-continue\r\n", 401},
		{"chunked", "POST", "Transfer-Encoding: chunked\r\n", 401},
		{"chunked-and-content-length", "POST", "Transfer-Encoding: chunked\r\nContent-Length: 10\r\n", 401},
		{"get-with-body", "GET", "Mcp-Session-Id: nosuchsession\r\nContent-Length: 16000000\r\n", 404},
		{"delete-with-body", "DELETE", "Mcp-Session-Id: nosuchsession\r\nTransfer-Encoding: chunked\r\n", 404},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn := dial(t, srv.Addr)
			t.Cleanup(func() { conn.Close() })
			head := fmt.Sprintf("%s /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n%s\r\n", c.method, srv.Addr, c.extra)
			if _, err := io.WriteString(conn, head); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(mcptest.CallTimeout))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer before the body: %v", err)
			}
			res.Body.Close()
			if res.StatusCode != c.want {
				t.Fatalf("HTTP %d, want %d", res.StatusCode, c.want)
			}
		})
	}
}
