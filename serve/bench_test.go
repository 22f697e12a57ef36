package serve_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/proxy"
	"github.com/delegateos/delegateos/serve"
)

// BenchmarkServeCall is one tools/call through the front and a relay to
// servebench's stdio upstream, from -cpu sessions' worth of goroutines
// (b.RunParallel), all in this process but the upstreams: the front's and
// the relay's CPU per call.
func BenchmarkServeCall(b *testing.B) {
	up := mcptest.Build(b, "./internal/cmd/servebench", false)
	e := mcptest.NewEnv(b)
	tok := e.Mint(nil, "mcp:echo:*")
	v, err := dct.NewVerifier(dct.Options{Roots: []string{e.Root.ID()}})
	if err != nil {
		b.Fatal(err)
	}
	g := &gate.Gate{Policy: policy.Default(), Verifier: v, Budget: budget.NewMemory()}
	srv, err := serve.New(serve.Options{Relay: func(ctx context.Context, s *serve.Session, in io.Reader, out io.Writer) error {
		return proxy.Run(ctx, proxy.Config{Upstream: []string{up, "stdio"}, Gate: g, SessionToken: tok.String()}, in, out)
	}, MaxSessions: 1024, MaxCalls: 4096})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv.Mux)
	defer func() { hs.Close(); srv.Drain(context.Background()) }()
	client := hs.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = 1024
	post := func(sid, body string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		return client.Do(req)
	}
	var mu sync.Mutex
	b.RunParallel(func(pb *testing.PB) {
		res, err := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`)
		if err != nil {
			b.Error(err)
			return
		}
		sid := res.Header.Get("Mcp-Session-Id")
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		for i := 1; pb.Next(); i++ {
			res, err := post(sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, i))
			if err != nil {
				mu.Lock()
				b.Error(err)
				mu.Unlock()
				return
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if !strings.Contains(string(body), `"result"`) {
				mu.Lock()
				b.Errorf("call answered %s", body)
				mu.Unlock()
				return
			}
		}
	})
}
