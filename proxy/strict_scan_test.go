package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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

func TestReadCallParams(t *testing.T) {
	dup := func(name string) error { return &repeatedMemberError{name: name} }
	many := `{"name":"echo","arguments":{`
	for i := range 20 {
		many += `"a` + strconv.Itoa(i) + `":1,`
	}
	for _, tt := range []struct {
		in    string
		err   error
		name  string
		args  string
		dos   string
		strip bool
	}{
		{in: `{"name":"echo","arguments":{"a":1,"b":[{"c":1},{"c":2}]}}`, name: `"echo"`, args: `{"a":1,"b":[{"c":1},{"c":2}]}`},
		{in: ` { "arguments" : null , "name" : "x" } `, name: `"x"`, args: `null`},
		{in: `{}`},
		{in: `{"name":"echo","_delegateos":{"dct":"t"}}`, name: `"echo"`, dos: `{"dct":"t"}`, strip: true},
		{in: `{"name":"echo","_DelegateOS":{"dct":"t"}}`, name: `"echo"`, strip: true},
		{in: `{"n\u0061me":"echo"}`, name: `"echo"`},
		{in: `{"name":"echo","NAME":"write_file"}`, err: dup("NAME")},
		{in: `{"name":"echo","n\u0061me":"write_file"}`, err: dup("name")},
		{in: `{"arguments":{"path":"/a","x":[{"Path":1,"path":2}]}}`, err: dup("path")},
		{in: `{"arguments":{"skill":1,"ſkill":2}}`, err: dup("ſkill")},
		{in: `{"arguments":{"k":1,"K":2}}`, err: dup("K")},
		{in: `{"arguments":{"k":1,"\u212A":2}}`, err: dup("K")},
		{in: `{"_delegateos":1,"_DELEGATEOS":2}`, err: dup("_DELEGATEOS")},
		{in: `{"":1,"":2}`, err: dup("")},
		{in: `{"arguments":{"":0,"":0}}`, err: dup("")},
		{in: `{"arguments":[{"":0,"\u0000":0},{"":0,"":0}]}`, err: dup("")},
		// Past the names compared in place, the folded map takes over.
		{in: many + `"A19":2}}`, err: dup("A19")},
		{in: many + `"a20":2}}`, name: `"echo"`, args: many[len(`{"name":"echo","arguments":`):] + `"a20":2}`},
		{in: many + `"\u0061\u0030":2}}`, err: dup("a0")},
		{in: `[]`, err: errParamsNotObject},
		{in: `"x"`, err: errParamsNotObject},
		{in: `{"a":1,}`, err: errParamsNotObject},
		{in: `{"a":1} x`, err: errParamsNotObject},
		{in: `{"a":1`, err: errParamsNotObject},
		{in: `{"a" 1}`, err: errParamsNotObject},
		{in: `{"a":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`, err: errParamsTooDeep},
		{in: `{"a":` + strings.Repeat(`{"b":`, 600) + `1` + strings.Repeat("}", 600) + `}`, err: errParamsTooDeep},
	} {
		cp, err := readCallParams([]byte(tt.in))
		if fmt.Sprint(err) != fmt.Sprint(tt.err) {
			t.Errorf("readCallParams(%.60s): error %v, want %v", tt.in, err, tt.err)
			continue
		}
		if err == nil && (string(cp.name) != tt.name || string(cp.arguments) != tt.args || string(cp.delegateos) != tt.dos || cp.strip != tt.strip) {
			t.Errorf("readCallParams(%.60s) = name %s arguments %s _delegateos %s strip %v", tt.in, cp.name, cp.arguments, cp.delegateos, cp.strip)
		}
	}
}

// nameSet finds the same repeats as comparing every name's folded form.
func FuzzNameSet(f *testing.F) {
	f.Add("a,B,c,A")
	f.Add("k,K,\u212A,s,ſ")
	f.Add("a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u,v,w,x,y,z,ſ")
	f.Fuzz(func(t *testing.T, list string) {
		var ns nameSet
		seen := map[string]bool{}
		for _, name := range strings.Split(list, ",") {
			want := seen[foldName(name)]
			seen[foldName(name)] = true
			if got := ns.add([]byte(name)); got != want {
				t.Fatalf("%q after %q: nameSet says %v, folded names say %v", name, list, got, want)
			}
		}
	})
}

// rpcMember agrees with decoding the name and comparing it to every
// member with strings.EqualFold, whichever path it takes.
func FuzzRPCMember(f *testing.F) {
	for _, s := range []string{`"id"`, `"ID"`, `"Id"`, `"jsonrpc"`, `"jſonrpc"`, `"m\u0065thod"`, `"\u212Ad"`, `"params"`, `"x"`, `""`, `"résult"`, `"\ud800"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		s := scanner{b: []byte(key)}
		raw, ok := s.str()
		if !ok || s.i != len(key) {
			return // not one JSON string: the scanner never passes it on
		}
		i, exact, ok := rpcMember(raw)
		name, ok2 := unquote(raw)
		if ok != ok2 {
			t.Fatalf("%s: rpcMember ok=%v, unquote ok=%v", key, ok, ok2)
		}
		if !ok {
			return
		}
		wantI, wantExact := -1, false
		for j, m := range rpcMembers {
			if strings.EqualFold(name, m) {
				wantI, wantExact = j, name == m
			}
		}
		if i != wantI || exact != wantExact {
			t.Fatalf("%s: rpcMember = %d, %v; want %d, %v", key, i, exact, wantI, wantExact)
		}
	})
}

// readCallParams agrees with encoding/json on well-formed params: it
// refuses exactly those with a member repeated in some object (names
// equal under strings.EqualFold), and finds the same name and arguments.
func FuzzReadCallParams(f *testing.F) {
	for _, s := range []string{
		`{"name":"echo","arguments":{"a":1,"b":[{"c":1},{"C":2}]}}`,
		`{"name":"echo","NAME":"x"}`, `{"n\u0061me":"echo","_delegateos":{"dct":"t"}}`,
		`{"arguments":{"k":1,"\u212a":2}}`, `{"a":{"b":{"c":{}}},"A":1}`, `[]`, `{}`, `{"a":1,}`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"J":11}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, params string) {
		cp, err := readCallParams([]byte(params))
		if !json.Valid([]byte(params)) {
			return
		}
		var obj map[string]json.RawMessage
		isObject := json.Unmarshal([]byte(params), &obj) == nil
		dup := foldedDuplicate(t, params)
		var rep *repeatedMemberError
		switch {
		case errors.Is(err, errParamsTooDeep):
			return
		case !isObject:
			if err != errParamsNotObject {
				t.Fatalf("%s is not an object, readCallParams says %v", params, err)
			}
		case errors.As(err, &rep):
			if !dup {
				t.Fatalf("%s: readCallParams finds %q repeated, encoding/json finds no repeat", params, rep.name)
			}
		case err != nil:
			t.Fatalf("%s: %v", params, err)
		case dup:
			t.Fatalf("%s: a repeated member was not found", params)
		default:
			if string(cp.name) != string(obj["name"]) || string(cp.arguments) != string(obj["arguments"]) {
				t.Fatalf("%s: name %s arguments %s; encoding/json reads %s and %s", params, cp.name, cp.arguments, obj["name"], obj["arguments"])
			}
		}
	})
}

// foldedDuplicate reports whether some object in the JSON text v gives two
// members whose names are equal under strings.EqualFold.
func foldedDuplicate(t *testing.T, v string) bool {
	dec := json.NewDecoder(strings.NewReader(v))
	type frame struct {
		object bool
		names  []string
		key    bool // the next string token is a member name
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.object && top.key {
			for _, n := range top.names {
				if strings.EqualFold(n, s) {
					return true
				}
			}
			top.names = append(top.names, s)
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true // a value ended
		}
	}
}
