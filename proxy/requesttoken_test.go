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
