package serve_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/delegateos/delegateos/serve"
)

// A server whose sessions each run a relay (here one that answers every
// request; delegateos serve runs proxy.Run), with a check run on every MCP
// request before it reaches a relay, and one more handler mounted next to
// the endpoint.
func ExampleNew() {
	srv, err := serve.New(serve.Options{
		Relay: answerAll,
		Authorize: func(r *http.Request, body []byte, s *serve.Session) error {
			if r.Header.Get("X-Signature") == "" {
				return errors.New("this server wants signed requests")
			}
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	srv.Mux.HandleFunc("GET /.well-known/agent-card.json", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"name":"gate"}`)
	})
	hs := httptest.NewServer(srv.Mux)
	defer func() { hs.Close(); srv.Drain(context.Background()) }()

	post := func(signature string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-Signature", signature)
		res, err := hs.Client().Do(req)
		if err != nil {
			panic(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	fmt.Println("unsigned:", post("").StatusCode)
	res := post("sig")
	fmt.Println("signed:", res.StatusCode, res.Header.Get("Content-Type"), len(res.Header.Get("Mcp-Session-Id")))
	card, _ := hs.Client().Get(hs.URL + "/.well-known/agent-card.json")
	b, _ := io.ReadAll(card.Body)
	card.Body.Close()
	fmt.Println(string(b))
	// Output:
	// unsigned: 403
	// signed: 200 text/event-stream 32
	// {"name":"gate"}
}
