// Command strictupstream is an MCP server on stdio that keeps to the
// session lifecycle as older SDKs do: it sends a client nothing of its own
// (no notifications/progress) until the client has sent
// notifications/initialized. Its one tool, slow, sends one progress
// notification when the call has a progressToken and the session is
// initialized, then answers "done". For the tests of relays that serve
// clients which never initialize (MCP 2026-07-28's stateless requests).
package main

import (
	"bufio"
	"encoding/json"
	"os"
)

type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method"`
	Params struct {
		ProtocolVersion string `json:"protocolVersion"`
		Meta            struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	} `json:"params"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	initialized := false
	for in.Scan() {
		var m message
		if json.Unmarshal(in.Bytes(), &m) != nil {
			continue
		}
		reply := func(result any) {
			_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
		}
		switch m.Method {
		case "initialize":
			reply(map[string]any{"protocolVersion": m.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "strictupstream", "version": "1"}})
		case "notifications/initialized":
			initialized = true
		case "ping":
			reply(map[string]any{})
		case "tools/list":
			reply(map[string]any{"tools": []any{map[string]any{"name": "slow", "inputSchema": map[string]any{"type": "object"}}}})
		case "tools/call":
			if initialized && len(m.Params.Meta.ProgressToken) > 0 {
				_ = out.Encode(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress",
					"params": map[string]any{"progressToken": m.Params.Meta.ProgressToken, "progress": 1, "total": 1}})
			}
			reply(map[string]any{"content": []any{map[string]any{"type": "text", "text": "done"}}})
		default:
			if m.ID != nil {
				_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
			}
		}
	}
}
