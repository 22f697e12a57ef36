package proxy

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestReadClientMessage(t *testing.T) {
	for _, tc := range []struct {
		frame string
		kind  MessageKind
		id    string
		code  int // the refusal's code, 0 if accepted
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, KindRequest, `1`, 0},
		{`{"jsonrpc":"2.0","id":"a","method":"ping"}`, KindRequest, `"a"`, 0},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, KindNotification, ``, 0},
		{`{"jsonrpc":"2.0","id":7,"result":{}}`, KindResponse, `7`, 0},
		{`{"jsonrpc":"2.0","id":1.0,"method":"ping"}`, 0, ``, codeInvalidRequest},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"ping"}`, 0, `1`, codeInvalidRequest},
		{`{"jsonrpc":"2.0","id":1,"Method":"ping"}`, 0, ``, codeInvalidRequest},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"\u2028\"}}", KindRequest, `1`, 0},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"\u2028}", 0, ``, codeParseError},
		{"{\"jsonrpc\":\"2.0\",\"id\":2,\r\"method\":\"ping\"}", 0, `2`, codeParseError},
		{`{"jsonrpc":"2.0",`, 0, ``, codeParseError},
		{`[1]`, 0, ``, codeInvalidRequest},
		{`{"id":0,"method":""}`, 0, ``, codeInvalidRequest},
		{`{"jsonrpc":"2.0","method":""}`, 0, ``, codeInvalidRequest},
	} {
		m, err := ReadClientMessage([]byte(tc.frame))
		if tc.code == 0 {
			if err != nil || m.Kind != tc.kind || string(m.ID) != tc.id {
				t.Errorf("%s: %+v %v", tc.frame, m, err)
			}
			continue
		}
		if !errors.Is(err, ErrUnreadable) {
			t.Errorf("%s: accepted (%+v)", tc.frame, m)
			continue
		}
		var reply struct {
			ID    json.RawMessage    `json:"id"`
			Error struct{ Code int } `json:"error"`
		}
		if err := json.Unmarshal(RefusalFrame(err), &reply); err != nil || reply.Error.Code != tc.code || tc.id != "" && string(reply.ID) != tc.id {
			t.Errorf("%s: refusal %s (%v), want code %d", tc.frame, RefusalFrame(err), err, tc.code)
		}
	}
}

// FuzzReadClientMessage: a frame is accepted only with a kind and, for a
// request, an id the relay matches answers by; a refusal is always a
// JSON-RPC error the transport can send.
func FuzzReadClientMessage(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"id":"x","result":{}}`, `{"method":"a"}`, `{"id":1,"id":2}`, `{"id":1e0,"method":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		m, err := ReadClientMessage(frame)
		if err != nil {
			if !json.Valid(RefusalFrame(err)) {
				t.Fatalf("refusal is not JSON: %s", RefusalFrame(err))
			}
			return
		}
		switch m.Kind {
		case KindRequest:
			if _, ok := parseRequestID(m.ID); !ok || m.Method == "" {
				t.Fatalf("accepted a request with id %q method %q", m.ID, m.Method)
			}
		case KindNotification, KindResponse:
		default:
			t.Fatalf("accepted a frame of no kind: %q", frame)
		}
	})
}

func TestRequestKeyAndCancelledRequestID(t *testing.T) {
	for _, tc := range []struct{ a, b string }{{`"a"`, `"\u0061"`}, {`7`, `7`}, {`"7"`, `"\u0037"`}} {
		ka, oka := RequestKey([]byte(tc.a))
		kb, okb := RequestKey([]byte(tc.b))
		if !oka || !okb || ka != kb {
			t.Errorf("RequestKey(%s) = %q, RequestKey(%s) = %q: want one key", tc.a, ka, tc.b, kb)
		}
	}
	if ks, _ := RequestKey([]byte(`"7"`)); ks == func() string { k, _ := RequestKey([]byte(`7`)); return k }() {
		t.Error(`RequestKey: "7" and 7 are one key`)
	}
	if _, ok := RequestKey([]byte(`1.0`)); ok {
		t.Error("RequestKey(1.0) accepted")
	}
	for frame, want := range map[string]string{
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}`:                 `"a"`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"x"}}`:      `3`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"RequestId":"a"}}`:                 ``,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"b","requestID":"a"}}`: ``,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a","requestId":"b"}}`: ``,
		`{"jsonrpc":"2.0","method":"notifications/cancelled"}`:                                            ``,
	} {
		id, ok := CancelledRequestID([]byte(frame))
		if ok != (want != "") || string(id) != want {
			t.Errorf("CancelledRequestID(%s) = %s, %v; want %q", frame, id, ok, want)
		}
	}
}
