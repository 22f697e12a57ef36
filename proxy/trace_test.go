package proxy

import (
	"encoding/json"
	"testing"
)

// The forwarded request carries the upstream span's traceparent in
// params._meta, whatever shape the params had, and is otherwise the
// request as the client sent it (less _delegateos).
func TestTraceEditForwardedParams(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, c := range []struct{ params, want string }{
		{`{}`, `{"_meta":{"traceparent":"` + tp + `"}}`},
		{` { } `, ` {"_meta":{"traceparent":"` + tp + `"} } `},
		{`{"name":"x"}`, `{"_meta":{"traceparent":"` + tp + `"},"name":"x"}`},
		{`{"_delegateos":{"dct":"t"}}`, `{"_meta":{"traceparent":"` + tp + `"}}`},
		{`{"_delegateos":{"dct":"t"},"name":"x"}`, `{"_meta":{"traceparent":"` + tp + `"},"name":"x"}`},
		{`{"name":"x","_delegateos":{"dct":"t"}}`, `{"_meta":{"traceparent":"` + tp + `"},"name":"x"}`},
		{`{"_meta":{}}`, `{"_meta":{"traceparent":"` + tp + `"}}`},
		{`{"_meta":{"progressToken":7}}`, `{"_meta":{"traceparent":"` + tp + `","progressToken":7}}`},
		{`{"_meta":{"traceparent":"00-old","tracestate":"a=b"},"name":"x"}`, `{"_meta":{"traceparent":"` + tp + `","tracestate":"a=b"},"name":"x"}`},
		{`{"_meta": { "traceparent" : 5 }}`, `{"_meta": { "traceparent" : "` + tp + `" }}`},
		{`{"_Meta":{"x":1}}`, `{"_Meta":{"traceparent":"` + tp + `","x":1}}`},
		{`{"_delegateos":{},"_meta":{"x":1}}`, `{"_meta":{"traceparent":"` + tp + `","x":1}}`},
		{`{"_meta":null,"name":"x"}`, `{"_meta":null,"name":"x"}`}, // not an object: left alone
	} {
		frame := []byte(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":` + c.params + `}`)
		h, err := scanHeader(frame)
		if err != nil {
			t.Fatalf("%s: %v", c.params, err)
		}
		cp, err := readCallParams(h.params)
		if err != nil {
			t.Fatalf("%s: %v", c.params, err)
		}
		p := &pending{}
		p.traceparent = append(p.tpBuf[:0], tp...)
		var s session
		got := s.forwardBytes(frame, h, &cp, 9, p)
		want := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":` + c.want + `}`
		if string(got) != want {
			t.Errorf("%s:\n got %s\nwant %s", c.params, got, want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: forwarded %s is not JSON", c.params, got)
		}
	}
}

// Without a span nothing is added: the request is forwarded as before.
func TestTraceEditOffLeavesParams(t *testing.T) {
	frame := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"a":1}}}`)
	h, _ := scanHeader(frame)
	cp, _ := readCallParams(h.params)
	var s session
	if got := s.forwardBytes(frame, h, &cp, 1, &pending{}); string(got) != string(frame) {
		t.Errorf("forwarded %s", got)
	}
	if got := s.forwardBytes(frame, h, &cp, 1, nil); string(got) != string(frame) {
		t.Errorf("forwarded %s", got)
	}
}

func TestMetaTraceContext(t *testing.T) {
	c := metaTraceContext([]byte(`{"progressToken":1,"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","trace\u0073tate":"k=v"}`))
	if c["traceparent"] != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" || c["tracestate"] != "k=v" {
		t.Errorf("carrier %v", c)
	}
	for _, bad := range []string{`null`, `[]`, `{}`, `{"traceparent":1}`, `{"x":1}`} {
		if c := metaTraceContext([]byte(bad)); c["traceparent"] != "" {
			t.Errorf("%s: carrier %v", bad, c)
		}
	}
}
