package proxy

import (
	"errors"
	"strings"
	"testing"
)

func TestScanClientHeader(t *testing.T) {
	for _, tt := range []struct {
		in     string
		method string
		err    error
	}{
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, method: "tools/call"},
		{in: `{"jsonrpc":"2.0","id":1,"m\u0065thod":"tools/call"}`, method: "tools/call"},
		{in: `{"jsonrpc":"2.0","id":1,"result":{},"x":1}`},
		{in: `{"jsonrpc":"2.0","id":1,"result":null,"method":"tools/call"}`, err: errScan},
		{in: `{"jsonrpc":"2.0","id":1,"method":"ping","METHOD":"tools/call"}`, err: errAmbiguous},
		{in: `{"jsonrpc":"2.0","id":1,"method":"ping","m\u0065thod":"tools/call"}`, err: errAmbiguous},
		{in: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{},"Params":{}}`, err: errAmbiguous},
		{in: `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, err: errAmbiguous},
		{in: `{"jsonrpc":"2.0","id":1,"method":"ping","\u212Ad":3}`, method: "ping"}, // KELVIN SIGN + d is not "id"
	} {
		h, err := scanClientHeader([]byte(tt.in))
		if !errors.Is(err, tt.err) || err == nil && h.method != tt.method {
			t.Errorf("scanClientHeader(%s) = %q, %v; want %q, %v", tt.in, h.method, err, tt.method, tt.err)
		}
	}
}

func TestRepeatedMember(t *testing.T) {
	for _, tt := range []struct {
		in   string
		name string
		ok   bool
	}{
		{in: `{"name":"echo","arguments":{"a":1,"b":[{"c":1},{"c":2}]}}`, ok: true},
		{in: `{"name":"echo","NAME":"write_file"}`, name: "NAME", ok: true},
		{in: `{"name":"echo","n\u0061me":"write_file"}`, name: "name", ok: true},
		{in: `{"arguments":{"path":"/a","x":[{"Path":1,"path":2}]}}`, name: "path", ok: true},
		{in: `{"skill":1,"ſkill":2}`, name: "ſkill", ok: true},
		{in: `{"k":1,"K":2}`, name: "K", ok: true},
		{in: `{"k":1,"\u212A":2}`, name: "\u212A", ok: true},
		{in: `[]`, ok: true},
		{in: `{"a":1,}`},
		{in: `{"a":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`},
	} {
		name, ok := repeatedMember([]byte(tt.in))
		if name != tt.name || ok != tt.ok {
			t.Errorf("repeatedMember(%.60s) = %q, %v; want %q, %v", tt.in, name, ok, tt.name, tt.ok)
		}
	}
}
