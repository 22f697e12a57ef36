package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"go.uber.org/zap"
)

// escapeName writes name as a JSON string, writing rune i as a \u escape
// when bit i%64 of mask is set (and as encoding/json would otherwise).
func escapeName(name string, mask uint64) []byte {
	b := []byte{'"'}
	i := 0
	for _, r := range name {
		if mask&(1<<(i%64)) != 0 {
			if r > 0xFFFF {
				hi, lo := utf16.EncodeRune(r)
				b = fmt.Appendf(b, `\u%04x\u%04X`, hi, lo)
			} else {
				b = fmt.Appendf(b, `\u%04X`, r)
			}
		} else {
			q, _ := json.Marshal(string(r))
			b = append(b, q[1:len(q)-1]...)
		}
		i++
	}
	return append(b, '"')
}

// callOutcomes runs tools/call with each raw name in turn through one
// session (whose token grants mcp:echo:*) and reports, for each, whether
// it was forwarded, or how it was refused.
func callOutcomes(t *testing.T, names ...[]byte) []string {
	var toClient, toServer bytes.Buffer
	s := testSession(t, zap.NewNop(), &toClient, &toServer)
	out := make([]string, len(names))
	for i, raw := range names {
		toClient.Reset()
		toServer.Reset()
		frame := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%s,"arguments":{}}}`, i+1, raw)
		s.clientFrame(frame)
		s.toServer.flush()
		s.toClient.flush()
		switch {
		case toServer.Len() > 0:
			out[i] = "forwarded"
		default:
			var m struct {
				Error struct {
					Code int
					Data struct{ Type string }
				}
			}
			_ = json.Unmarshal(toClient.Bytes(), &m)
			out[i] = fmt.Sprintf("refused %d %s", m.Error.Code, m.Error.Data.Type)
		}
	}
	return out
}

// Every spelling of a tool name gets the decision its decoded string
// gets, whatever spelling of whatever name the session's previous call
// used.
func FuzzEscapedToolName(f *testing.F) {
	f.Add("echo", uint64(0), "echo")
	f.Add("echo", uint64(2), `e\u0063ho`)
	f.Add("echo", uint64(0xff), "ech")
	f.Add("get-env", uint64(1<<4), `get-\u0065nv`)
	f.Add("e\u2028cho", uint64(0), "echo")
	f.Add("écho", uint64(1), "echo")
	f.Fuzz(func(t *testing.T, name string, mask uint64, prev string) {
		if name == "" || len(name) > 200 || !utf8.ValidString(name) || !utf8.ValidString(prev) {
			return
		}
		plain, _ := json.Marshal(name)
		want := callOutcomes(t, plain)[0]
		prevRaw, _ := json.Marshal(prev)
		// prev's own text (its backslashes kept) read as a spelling, too.
		prevVerbatim := []byte(`"` + strings.ReplaceAll(strings.ReplaceAll(prev, `\`, `\\`), `"`, `\"`) + `"`)
		escaped := escapeName(name, mask)
		for _, seq := range [][][]byte{{escaped}, {prevRaw, escaped}, {prevVerbatim, escaped}, {plain, escaped}, {escaped, plain}} {
			got := callOutcomes(t, seq...)
			last := got[len(got)-1]
			if (last == "forwarded") != (want == "forwarded") {
				t.Fatalf("after %q, the call named %s was %s; spelt %s it is %s", seq[:len(seq)-1], seq[len(seq)-1], last, plain, want)
			}
			if strings.HasPrefix(last, "refused -32001") && strings.HasPrefix(want, "refused -32001") && last != want {
				t.Fatalf("the call named %s was %s; spelt %s it is %s", seq[len(seq)-1], last, plain, want)
			}
		}
	})
}

// Cutting params._delegateos leaves valid JSON: the same object without
// that member, whatever the member's place, spacing or spelling.
func FuzzStripDelegateos(f *testing.F) {
	f.Add(`{"_delegateos":{"dct":"x"}}`)
	f.Add(`{"name":"echo","_delegateos":{"dct":"x"},"arguments":{}}`)
	f.Add(`{ "_DelegateOS" : 1 , "a" : [1,2] }`)
	f.Add(`{"a":1 ,"_d\u0065legateos":null}`)
	f.Fuzz(func(t *testing.T, params string) {
		cp, err := readCallParams([]byte(params))
		if err != nil || !cp.strip {
			return
		}
		cut := params[:cp.stripFrom] + params[cp.stripTo:]
		var before, after map[string]json.RawMessage
		if err := json.Unmarshal([]byte(params), &before); err != nil {
			t.Fatalf("readCallParams accepted %q, encoding/json refuses it: %v", params, err)
		}
		if err := json.Unmarshal([]byte(cut), &after); err != nil {
			t.Fatalf("cutting _delegateos from %q left %q: %v", params, cut, err)
		}
		for k := range before {
			if strings.EqualFold(k, "_delegateos") {
				delete(before, k)
			}
		}
		if len(before) != len(after) {
			t.Fatalf("cutting _delegateos from %q left %q", params, cut)
		}
		for k, v := range before {
			if !bytes.Equal(after[k], v) {
				t.Fatalf("cutting _delegateos from %q changed %s", params, k)
			}
		}
	})
}
