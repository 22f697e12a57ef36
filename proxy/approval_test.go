package proxy

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/delegateos/delegateos/internal/render"
)

func TestReadApprovalAnswer(t *testing.T) {
	cases := []struct {
		frame   string
		action  string
		approve bool
		bad     string // part of the error, "" for none
	}{
		{`{"jsonrpc":"2.0","id":"a","result":{"action":"accept","content":{"approve":true}}}`, "accept", true, ""},
		{`{"jsonrpc":"2.0","id":"a","result":{"action":"accept","content":{"approve":false}}}`, "accept", false, ""},
		{`{"jsonrpc":"2.0","id":"a","result":{"action":"accept","content":{"approve":"true"}}}`, "accept", false, ""},
		{`{"jsonrpc":"2.0","id":"a","result":{"action":"accept"}}`, "accept", false, ""},
		{`{"jsonrpc":"2.0","id":"a","result":{"action":"decline","content":{"approve":true}}}`, "decline", false, ""},
		{`{"jsonrpc":"2.0","id":"a","result":{"action":"cancel"}}`, "cancel", false, ""},
		{`{"jsonrpc":"2.0","id":"a","result":{"action":"accept","content":{"approve":true,"Approve":false}}}`, "accept", false, ""},
		{`{"jsonrpc":"2.0","id":"a","result":{"action":"accept","content":{"approve":false,"approve":true}}}`, "", false, "read two ways"},
		{`{"jsonrpc":"2.0","id":"a","result":{"action":"decline","Action":"accept","content":{"approve":true}}}`, "", false, "letter case"},
		{`{"jsonrpc":"2.0","id":"a","result":{"ACTION":"accept"}}`, "", false, "letter case"},
		{`{"jsonrpc":"2.0","id":"a","result":{}}`, "", false, "no action"},
		{`{"jsonrpc":"2.0","id":"a","result":{"action":7}}`, "", false, "no action"},
		{`{"jsonrpc":"2.0","id":"a","result":[]}`, "", false, "not an object"},
		{`{"jsonrpc":"2.0","id":"a","error":{"code":-32601,"message":"no\u2028way"}}`, "", false, `with an error: no\u2028way`},
		{`{"jsonrpc":"2.0","id":"a"}`, "", false, "no result"},
		{"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{\"action\":\"acc\xffept\"}}", "", false, "read two ways"},
	}
	for _, c := range cases {
		r, bad := readApprovalAnswer([]byte(c.frame))
		switch {
		case c.bad != "" && !strings.Contains(bad, c.bad):
			t.Errorf("%s: error %q, want one containing %q", c.frame, bad, c.bad)
		case c.bad == "" && (bad != "" || r.action != c.action || r.approve != c.approve):
			t.Errorf("%s: %q %v %q, want %q %v", c.frame, r.action, r.approve, bad, c.action, c.approve)
		}
	}
}

func TestReadClientCapabilities(t *testing.T) {
	cases := []struct {
		params   string
		elicit   bool
		answerer string
	}{
		{`{"capabilities":{"elicitation":{}},"clientInfo":{"name":"c","version":"1"}}`, true, "c/1"},
		{`{"capabilities":{"elicitation":{"form":{}}},"clientInfo":{"name":"c"}}`, true, "c"},
		{`{"capabilities":{"elicitation":{"form":{},"url":{}}}}`, true, ""},
		{`{"capabilities":{"elicitation":{"url":{}}}}`, false, ""},
		{`{"capabilities":{"elicitation":{"form":null}}}`, false, ""},
		{`{"capabilities":{"elicitation":null}}`, false, ""},
		{`{"capabilities":{"elicitation":true}}`, false, ""},
		{`{"capabilities":{"Elicitation":{}}}`, false, ""},
		{`{"capabilities":{}}`, false, ""},
		{`{"capabilities":{"elicitation":{}},"capabilities":{}}`, false, ""},
		{`[]`, false, ""},
	}
	for _, c := range cases {
		elicit, who := readClientCapabilities([]byte(c.params))
		if elicit != c.elicit || who != c.answerer {
			t.Errorf("%s: %v %q, want %v %q", c.params, elicit, who, c.elicit, c.answerer)
		}
	}
}

func TestArgumentsSummary(t *testing.T) {
	cases := []struct{ args, want string }{
		{``, ``},
		{`null`, ``},
		{`{ "path" : "/a" }`, `{"path":"/a"}`},
		{`{"text":"line\u2028two\u202eevil"}`, `{"text":"line\u2028two\u202eevil"}`},
		{"{\"text\":\"raw\u202e\"}", `{"text":"raw\u202e"}`},
		{`{"x":"` + strings.Repeat("a", 600) + `"}`, `{"x":"` + strings.Repeat("a", maxArgumentsShown-6) + `… (608 bytes in all)`},
	}
	for _, c := range cases {
		if got := argumentsSummary([]byte(c.args)); got != c.want {
			t.Errorf("argumentsSummary(%.40q) = %q, want %q", c.args, got, c.want)
		}
	}
}

func FuzzApprovalAnswer(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":"a","result":{"action":"accept","content":{"approve":true}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"a","result":{"action":"decline"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"a","error":{"code":1,"message":"x"}}`))
	f.Fuzz(func(t *testing.T, frame []byte) {
		r, bad := readApprovalAnswer(frame)
		if bad != "" {
			return
		}
		if r.action == "" {
			t.Fatal("an answer without an action was read")
		}
		if r.approve && r.action != "accept" {
			t.Fatalf("approve read with action %q", r.action)
		}
	})
}

func FuzzClientCapabilities(f *testing.F) {
	f.Add([]byte(`{"capabilities":{"elicitation":{}},"clientInfo":{"name":"c","version":"1"}}`))
	f.Add([]byte(`{"capabilities":{"elicitation":{"url":{}}}}`))
	f.Fuzz(func(t *testing.T, params []byte) {
		_, who := readClientCapabilities(params)
		if len(who) > 128+64+len("/")+2*len("…") {
			t.Fatalf("answerer %d bytes", len(who))
		}
	})
}

func FuzzArgumentsSummary(f *testing.F) {
	f.Add([]byte(`{"path":"/a","text":"x\u2028y"}`))
	f.Fuzz(func(t *testing.T, args []byte) {
		s := argumentsSummary(args)
		if render.Escaped(s) != s {
			t.Fatalf("summary %q holds what a terminal would act on", s)
		}
		if !utf8.ValidString(s) {
			t.Fatalf("summary %q is not UTF-8", s)
		}
	})
}

func TestReadModernParams(t *testing.T) {
	const caps = `"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"m","version":"2"}}`
	cases := []struct {
		params  string
		modern  bool
		elicit  bool
		state   string
		answer  string
		bad     string
		answerr string
	}{
		{`{"name":"x"}`, false, false, "", "", "", ""},
		{`{"name":"x","arguments":{"requestState":"s"}}`, false, false, "", "", "", ""},
		{`{"name":"x",` + caps + `}`, true, true, "", "", "", "m/2"},
		{`{"name":"x","_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}`, true, false, "", "", "", ""},
		{`{"name":"x","requestState":"s","inputResponses":{"delegateos/approval":{"action":"accept"}}}`, true, false, "s", `{"action":"accept"}`, "", ""},
		{`{"name":"x","requestState":7}`, false, false, "", "", "not a string", ""},
		{`{"name":"x","requestState":"a","requestState":"b"}`, false, false, "", "", "read two ways", ""},
		{`{"name":"x","requestState":"a","RequestState":"b"}`, false, false, "", "", "letter case", ""},
	}
	for _, c := range cases {
		m, modern, bad := readModernParams([]byte(c.params))
		switch {
		case c.bad != "" && !strings.Contains(bad, c.bad):
			t.Errorf("%s: error %q, want %q", c.params, bad, c.bad)
		case c.bad == "" && (bad != "" || modern != c.modern || m.elicit != c.elicit || m.state != c.state || string(m.answer) != c.answer || m.answerer != c.answerr):
			t.Errorf("%s: %+v %v %q", c.params, m, modern, bad)
		}
	}
}

func FuzzModernParams(f *testing.F) {
	f.Add([]byte(`{"name":"x","requestState":"s","inputResponses":{"delegateos/approval":{"action":"accept","content":{"approve":true}}},"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}`))
	f.Fuzz(func(t *testing.T, params []byte) {
		m, modern, bad := readModernParams(params)
		if bad != "" && modern {
			t.Fatal("refused params read as modern")
		}
		if !modern && (m.elicit || m.state != "" || m.answer != nil) {
			t.Fatalf("params not read as modern carry %+v", m)
		}
		if m.answer != nil {
			if r, bad := readApprovalResult(m.answer); bad == "" && r.approve && r.action != "accept" {
				t.Fatalf("approve read with action %q", r.action)
			}
		}
	})
}
