package proxy

import "testing"

func TestRequestToken(t *testing.T) {
	for _, c := range []struct {
		frame, want string
		err         bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_delegateos":{"dct":"TOK"}}}`, "TOK", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`, "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_delegateos":{"dct":"TOK","format":"delegateos-sjt-v1"}}}`, "TOK", false},
		// A token the relay decides nothing with is not the message's.
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_delegateos":{"dct":"TOK"}}}`, "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t","_delegateos":{"dct":"TOK"}}}`, "", false},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"_delegateos":{"dct":"TOK"}}}`, "", false},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","_delegateos":{"dct":"TOK"}}}`, "", false},
		// What the relay refuses, so that no other token is read from it.
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_delegateos":{"dct":"A"},"_delegateos":{"dct":"B"}}}`, "", true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_delegateos":{"dct":"A"},"_DelegateOS":{"dct":"B"}}}`, "", true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_delegateos":{"dct":"A","format":"jwt"}}}`, "", true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_delegateos":"A"}}`, "", true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"x"}`, "", true},
		{`not json`, "", true},
	} {
		got, err := RequestToken([]byte(c.frame))
		if got != c.want || (err != nil) != c.err {
			t.Errorf("%s: got %q, %v", c.frame, got, err)
		}
	}
}

// FuzzRequestToken checks that RequestToken, which serve runs on every
// POST body when signatures are required, never panics and reads a token
// only from a frame whose params it could read.
func FuzzRequestToken(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_delegateos":{"dct":"TOK"}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_DelegateOS":{"dct":"A"}}}`))
	f.Fuzz(func(t *testing.T, frame []byte) {
		tok, err := RequestToken(frame)
		if err != nil || tok == "" {
			return
		}
		h, err := scanClientHeader(frame)
		if err != nil || h.params == nil {
			t.Fatalf("a token %q from a frame without readable params: %v", tok, err)
		}
		if _, err := readCallParams(h.params); err != nil {
			t.Fatalf("a token %q from params the relay refuses: %v", tok, err)
		}
	})
}
