package serve_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// An answer given before the body is read (an unknown session, no
// credential) to a chunked request whose body never comes is sent at
// once with Connection: close: net/http does not wait for the body until
// --read-timeout (here 10 minutes, longer than the test waits).
func TestServeRefusalBeforeBodyClosesConnection(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--read-timeout", "10m"}})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	for _, c := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"unknown session", map[string]string{"Mcp-Session-Id": "no-such-session", "Authorization": tok["Authorization"]}, http.StatusNotFound},
		{"no credential", nil, http.StatusUnauthorized},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := dial(t, srv.Addr)
			t.Cleanup(func() { conn.Close() })
			var b strings.Builder
			fmt.Fprintf(&b, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n", srv.Addr)
			for k, v := range c.hdr {
				fmt.Fprintf(&b, "%s: %s\r\n", k, v)
			}
			b.WriteString("\r\n")
			if _, err := io.WriteString(conn, b.String()); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(mcptest.CallTimeout))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer while the body is not sent: %v", err)
			}
			res.Body.Close()
			if res.StatusCode != c.want || !res.Close {
				t.Fatalf("HTTP %d, Connection: close %v; want %d and close", res.StatusCode, res.Close, c.want)
			}
		})
	}
}

// A body of no declared length (chunked) is charged as it is read, and one
// larger than the first step is read whole and served.
func TestServeChunkedBodyChargedAsRead(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--max-body-bytes", "1048576", "--max-body-bytes-in-flight", "1048576"}})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	sid := srv.Initialize(tok)
	for _, n := range []int{1000, 200 << 10} {
		body := echoCall("7", n)
		req, err := http.NewRequest(http.MethodPost, srv.URL, io.MultiReader(strings.NewReader(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = -1
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		for k, v := range tok {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(got), "aaaa") {
			t.Fatalf("a chunked body of %d bytes: HTTP %d %.200s", n, res.StatusCode, got)
		}
	}
	// Over a credential's share (256 KiB), a chunked body is refused once
	// it is read past it.
	req, _ := http.NewRequest(http.MethodPost, srv.URL, io.MultiReader(strings.NewReader(echoCall("8", 300<<10))))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	for k, v := range tok {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a chunked body of 300 KiB over a credential's share: HTTP %d", res.StatusCode)
	}
}
