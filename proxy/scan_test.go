package proxy

import (
	"bytes"
	"strings"
	"testing"
)

func TestScanHeader(t *testing.T) {
	tests := []struct {
		in      string
		kind    kind
		method  string
		id      string
		isError bool
		bad     bool
	}{
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, kind: kindRequest, method: "tools/call", id: "1"},
		{in: ` { "method" : "a\/b" , "id" : "x\"y" } `, kind: kindRequest, method: "a/b", id: `"x\"y"`},
		{in: `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1}}`, kind: kindNotification, method: "notifications/progress"},
		{in: `{"jsonrpc":"2.0","id":7,"result":{"content":[` + strings.Repeat(`"x",`, 1000) + `"y"]}}`, kind: kindResponse, id: "7"},
		{in: `{"result":{},"jsonrpc":"2.0","id":8}`, kind: kindResponse, id: "8"},
		{in: `{"jsonrpc":"2.0","id":9,"error":{"code":1,"message":"m"}}`, kind: kindResponse, id: "9", isError: true},
		{in: `{"jsonrpc":"2.0","id":null,"method":"x"}`, kind: kindRequest, method: "x", id: "null"},
		{in: `garbage`, bad: true},
		{in: `{}`, bad: true},
		{in: `{"id":1}`, bad: true},
		{in: `{"method":"x","result":1}`, bad: true},
		{in: `{"method":1}`, bad: true},
		{in: `{"method":"x",}`, bad: true},
		{in: `{"method":"x"} trailing`, bad: true},
		{in: `{"method":"x","params":[1,2}`, bad: true},
		{in: `{"method":"x","params":tru}`, bad: true},
		{in: `{"method":"x\u0000"}`, kind: kindNotification, method: "x\x00"},
		{in: "{\"method\":\"x\ny\"}", bad: true},
		{in: `{"method":"x","params":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`, bad: true},
	}
	for _, tt := range tests {
		h, err := scanHeader([]byte(tt.in))
		if tt.bad {
			if err == nil {
				t.Errorf("%.60q: want an error, got %+v", tt.in, h)
			}
			continue
		}
		if err != nil {
			t.Errorf("%.60q: %v", tt.in, err)
			continue
		}
		if h.kind != tt.kind || h.method != tt.method || string(h.id) != tt.id || h.isError != tt.isError {
			t.Errorf("%.60q: got kind=%d method=%q id=%s isError=%v", tt.in, h.kind, h.method, h.id, h.isError)
		}
	}
}

func TestScanHeaderPrefixKeepsID(t *testing.T) {
	// A truncated oversize frame still yields its id for the error reply.
	h, err := scanHeader([]byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"arguments":{"content":"xxxxx`))
	if err == nil || string(h.id) != "42" || h.method != "tools/call" {
		t.Fatalf("got %+v, %v", h, err)
	}
}

func TestResultMember(t *testing.T) {
	f := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a\"}"}],"resultType":"input_required","_meta":{}}}`)
	if got := string(resultMember(f, "resultType")); got != `"input_required"` {
		t.Fatalf("got %q", got)
	}
	if resultMember(f, "missing") != nil || resultMember([]byte(`{"error":{}}`), "resultType") != nil {
		t.Fatal("absent members must be nil")
	}
}

func FuzzScanHeader(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, `{"id":"a","result":{"x":[1,2,{"y":null}]}}`, `{"method":"n"}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := scanHeader(b)
		if err == nil && h.kind == kindInvalid {
			t.Fatal("accepted without a kind")
		}
		resultMember(b, "resultType")
		inputRequired(b)
		if err == nil {
			// Whatever the id, looking it up must not panic, and an id
			// accepted from a client must find its own request.
			tab := newPendingTable()
			tab.lookup(h.id)
			if key, ok := parseRequestID(h.id); ok {
				p := newPending(key, h.id, h.method)
				tab.put(p)
				if tab.lookup(h.id) != p {
					t.Fatalf("request id %s does not find its request", h.id)
				}
			}
		}
	})
}

func TestInputRequired(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{}}}`, true},
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x"}],"resultType":"input_required"}}`, true},
		// The word alone is not enough: it must be result.resultType.
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"\"input_required\""}]}}`, false},
		{`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","note":"input_required"}}`, false},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"input_required","data":{"resultType":"input_required"}}}`, false},
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`, false},
	} {
		if got := inputRequired([]byte(tt.in)); got != tt.want {
			t.Errorf("inputRequired(%s) = %v", tt.in, got)
		}
	}
}

// plainASCII agrees with a byte-by-byte reading on every length and
// position of a carriage return or a byte ≥ 0x80, including 0x8d, whose low
// bits are '\r”s.
func TestPlainASCII(t *testing.T) {
	slow := func(b []byte) bool {
		for _, c := range b {
			if c >= 0x80 || c == '\r' {
				return false
			}
		}
		return true
	}
	for n := range 40 {
		base := bytes.Repeat([]byte("a"), n)
		if !plainASCII(base) {
			t.Fatalf("%d ASCII bytes refused", n)
		}
		for i := range n {
			for _, c := range []byte{'\r', 0x80, 0x8d, 0xff, 0x0c, 0x0e, 0x7f, 0x00} {
				b := bytes.Clone(base)
				b[i] = c
				if got, want := plainASCII(b), slow(b); got != want {
					t.Fatalf("len %d, %#x at %d: %v, want %v", n, c, i, got, want)
				}
			}
		}
	}
}

func FuzzPlainASCII(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\"}\r"))
	f.Fuzz(func(t *testing.T, b []byte) {
		want := bytes.IndexByte(b, '\r') < 0
		for _, c := range b {
			if c >= 0x80 {
				want = false
			}
		}
		if plainASCII(b) != want {
			t.Fatalf("plainASCII(%q) = %v", b, !want)
		}
	})
}
