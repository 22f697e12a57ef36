package serve_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/delegateos/delegateos/proxy"
	"github.com/delegateos/delegateos/serve"
)

// answerAll is a relay that answers every request with an empty result.
func answerAll(_ context.Context, _ *serve.Session, in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		m, err := proxy.ReadRelayMessage(sc.Bytes())
		if err == nil && m.Kind == proxy.KindRequest {
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", m.ID)
		}
	}
	return nil
}

type statusErr struct{ code int }

func (e statusErr) Error() string   { return "signature required" }
func (e statusErr) StatusCode() int { return e.code }

// Options.Authorize sees every request with its body and session before
// the relay does, and its error refuses the request with its status;
// handlers mounted on Mux are served next to the endpoint.
func TestAuthorizeHookAndMux(t *testing.T) {
	type seen struct {
		method, body string
		session      string
	}
	var mu sync.Mutex
	var calls []seen
	srv, err := serve.New(serve.Options{Relay: answerAll, Authorize: func(r *http.Request, body []byte, s *serve.Session) error {
		mu.Lock()
		defer mu.Unlock()
		id := ""
		if s != nil {
			id = s.ID
		}
		calls = append(calls, seen{r.Method, string(body), id})
		if r.Header.Get("X-Sign") != "ok" {
			return statusErr{401}
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Mux.HandleFunc("GET /.well-known/extra", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "mounted") })
	hs := httptest.NewServer(srv.Mux)
	defer func() { hs.Close(); srv.Drain(context.Background()) }()
	do := func(method, sid, sign, body string) *http.Response {
		req, _ := http.NewRequest(method, hs.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		req.Header.Set("X-Sign", sign)
		res, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`
	if res := do(http.MethodPost, "", "no", init); res.StatusCode != 401 || res.Header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("refused initialize: HTTP %d", res.StatusCode)
	}
	res := do(http.MethodPost, "", "ok", init)
	sid := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: HTTP %d", res.StatusCode)
	}
	if res := do(http.MethodPost, sid, "ok", `{"jsonrpc":"2.0","id":1,"method":"ping"}`); res.StatusCode != 200 {
		t.Fatalf("ping: HTTP %d", res.StatusCode)
	}
	if res := do(http.MethodPost, sid, "no", `{"jsonrpc":"2.0","id":2,"method":"ping"}`); res.StatusCode != 401 {
		t.Fatalf("unsigned ping: HTTP %d", res.StatusCode)
	}
	if res := do(http.MethodDelete, sid, "no", ""); res.StatusCode != 401 {
		t.Fatalf("unsigned DELETE: HTTP %d", res.StatusCode)
	}
	mu.Lock()
	got := fmt.Sprint(calls)
	mu.Unlock()
	want := fmt.Sprintf("[{POST %s } {POST %s } {POST %s %s} {POST %s %s} {DELETE  %s}]", init, init,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`, sid, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, sid, sid)
	if got != want {
		t.Fatalf("Authorize saw\n%s\nwant\n%s", got, want)
	}
	r, err := hs.Client().Get(hs.URL + "/.well-known/extra")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if string(b) != "mounted" {
		t.Fatalf("mounted handler: %q", b)
	}
	if _, err := serve.New(serve.Options{}); err == nil {
		t.Fatal("New without a relay succeeded")
	}
}
