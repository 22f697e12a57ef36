package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// peerUpstream is an HTTP MCP upstream whose tools/call answers are the
// test's: each call is announced on calls (its raw request) and answered
// with the next answer the test sends (a JSON-RPC member: `"result":…` or
// `"error":…`).
type peerUpstream struct {
	calls   chan json.RawMessage
	answers chan string
}

func newPeerUpstream() *peerUpstream {
	return &peerUpstream{calls: make(chan json.RawMessage, 16), answers: make(chan string, 16)}
}

func (u *peerUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &m)
	w.Header().Set("Mcp-Session-Id", "rt3")
	switch {
	case m.ID == nil:
		w.WriteHeader(http.StatusAccepted)
	case m.Method == "tools/call":
		u.calls <- body
		var answer string
		select {
		case answer = <-u.answers:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,%s}`, m.ID, answer)
	case m.Method == "tools/list":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}}`, m.ID)
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"rt3","version":"1"}}}`, m.ID)
	}
}
