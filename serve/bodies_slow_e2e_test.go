package serve_test

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// A client that declares a body and stalls in it is cut off whatever its
// request: one the front refuses before reading the body (a wrong
// Content-Type or Accept, a foreign Host), a GET or a DELETE, which have
// no body to read, or a request for another path. net/http reads what the
// handler left of a small body before it answers, and nothing else bounds
// that read.
func TestServeSlowBodyOnAnyRequestIsCutOff(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--read-timeout", "500ms"}})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	sid := srv.Initialize(tok)
	for name, head := range map[string]string{
		"POST text/plain":         "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n",
		"POST without Accept":     "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
		"POST foreign Host":       "POST /mcp HTTP/1.1\r\nHost: evil.example.com\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n",
		"POST chunked text/plain": "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n",
		"DELETE with a body":      "DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: 00000000000000000000000000000000\r\nContent-Length: 100\r\n\r\n",
		"GET with a body":         "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nMcp-Session-Id: " + sid + "\r\nAuthorization: " + tok["Authorization"] + "\r\nContent-Length: 100\r\n\r\n",
		"healthz with a body":     "POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			conn := dial(t, srv.Addr)
			defer conn.Close()
			if _, err := io.WriteString(conn, head+`{"jsonrpc"`); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(mcptest.WaitTimeout))
			if _, err := io.Copy(io.Discard, conn); err != nil {
				if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
					t.Fatalf("the server held a connection whose body stalled for %s", mcptest.WaitTimeout)
				}
			}
		})
	}
	// The GET of a session that sent its whole (empty) body still streams
	// past the read timeout.
	conn := dial(t, srv.Addr)
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nMcp-Session-Id: "+sid+"\r\nAuthorization: "+tok["Authorization"]+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET: %v %v", res, err)
	}
	time.Sleep(time.Second) // twice the read timeout
	_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := io.Copy(io.Discard, br); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("the GET stream ended after the read timeout: %v", err)
	}
}
