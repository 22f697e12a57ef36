package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzFirstRequest: whatever a client sends a proxy that cannot start, the
// answer to its first request is nothing (no request came) or one line holding one JSON-RPC
// error response that carries the reason, under the id of a request the
// client sent, or null.
func FuzzFirstRequest(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n",
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + `{"jsonrpc":"2.0","id":"a","method":"ping"}`,
		"not json\n",
		`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n",
		"\n\r\n",
		`[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`,
		`{"jsonrpc":"2.0","id":1,"id":2,"method":"initialize"}`,
	} {
		f.Add([]byte(s))
	}
	const reason = "delegateos proxy cannot start: \"x\"\n<y>"
	f.Fuzz(func(t *testing.T, in []byte) {
		out, _ := nextRequest(bufio.NewReader(bytes.NewReader(in)), reason)
		if out == nil {
			return
		}
		if bytes.ContainsAny(out, "\n\r") {
			t.Fatalf("the answer is not one line: %q", out)
		}
		var m struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(out, &m); err != nil || m.JSONRPC != "2.0" || m.Error.Message != reason || m.Error.Code != -32603 {
			t.Fatalf("the answer %q is not the error response carrying the reason (%v)", out, err)
		}
		if id := string(m.ID); id != "null" && !strings.Contains(string(in), id) {
			t.Fatalf("the answer's id %s is not one the client sent", id)
		}
	})
}
