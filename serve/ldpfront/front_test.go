package ldpfront

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/delegateos/delegateos/avpsig"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/ldp"
	"github.com/delegateos/delegateos/policy"
)

func TestToolArguments(t *testing.T) {
	task := func(mode ldp.PayloadMode, in string) *ldp.Task {
		return &ldp.Task{Mode: mode, Submit: &ldp.TaskSubmit{Input: json.RawMessage(in)}}
	}
	cases := []struct {
		skill policy.LDPSkill
		task  *ldp.Task
		want  string // "" means an error
	}{
		{policy.LDPSkill{Name: "e", InputArgument: "text"}, task(ldp.ModeText, `"hi"`), `{"text":"hi"}`},
		{policy.LDPSkill{Name: "e", InputArgument: "text"}, task(ldp.ModeSemanticFrame, `{"task_type":"x","instruction":"do"}`), `{"text":"do"}`},
		{policy.LDPSkill{Name: "e", InputArgument: "text"}, task(ldp.ModeSemanticFrame, `{"task_type":"x","instruction":"do","input":"data"}`), `{"text":"data"}`},
		{policy.LDPSkill{Name: "r", Arguments: json.RawMessage(`{"path":"/a"}`)}, task(ldp.ModeText, `"ignored"`), `{"path":"/a"}`},
		{policy.LDPSkill{Name: "r", Arguments: json.RawMessage(`{"path":"/a"}`), InputArgument: "q"}, task(ldp.ModeText, `"x"`), `{"path":"/a","q":"x"}`},
		{policy.LDPSkill{Name: "s"}, task(ldp.ModeText, `{"query":"x"}`), `{"query":"x"}`},
		{policy.LDPSkill{Name: "s"}, task(ldp.ModeText, `"not an object"`), ""},
	}
	for i, c := range cases {
		args, err := toolArguments(&c.skill, c.task)
		if c.want == "" {
			if err == nil {
				t.Errorf("%d: no error", i)
			}
			continue
		}
		b, _ := json.Marshal(args)
		if err != nil || string(b) != c.want {
			t.Errorf("%d: %s %v, want %s", i, b, err, c.want)
		}
	}
}

func TestJSONRPCResponse(t *testing.T) {
	sse := &captureWriter{header: http.Header{"Content-Type": {"text/event-stream"}}}
	sse.body.WriteString("id: 1\nretry: 1000\ndata: \n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n\n")
	r, err := jsonrpcResponse(sse, "1")
	if err != nil || string(r.Result) != `{"content":[]}` {
		t.Fatalf("%v %+v", err, r)
	}
	plain := &captureWriter{header: http.Header{"Content-Type": {"application/json"}}, status: 401}
	plain.body.WriteString(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no"}}`)
	if _, err := jsonrpcResponse(plain, "1"); err == nil {
		t.Fatal("a response to no request was taken")
	}
}

func TestLatencies(t *testing.T) {
	var l latencies
	card := &ldp.IdentityCard{Capabilities: []ldp.Capability{{Name: "a"}, {Name: "b"}}}
	for _, ms := range []int{5, 1, 3} {
		l.add("a", time.Duration(ms)*time.Millisecond+time.Microsecond)
	}
	got := l.card(card)
	if p := got.Capabilities[0].LatencyHintMsP50; p == nil || *p != 4 {
		t.Fatalf("p50 of a: %v (3 ms and a bit, rounded up)", p)
	}
	if got.Capabilities[1].LatencyHintMsP50 != nil || card.Capabilities[0].LatencyHintMsP50 != nil {
		t.Fatal("a skill never called has a latency, or the card itself was changed")
	}
	for range latencyWindow + 10 {
		l.add("a", time.Millisecond)
	}
	if n := len(l.m["a"]); n != latencyWindow {
		t.Fatalf("%d kept", n)
	}
}

// TestDenialCategories: every DelegateOS denial type (dct's and the
// gate's) has its category in the table, so that a TASK_FAILED carrying it
// is read as the refusal it is; the token's authority is policy, a token
// that does not hold is security, the delegate's own stores runtime.
func TestDenialCategories(t *testing.T) {
	want := map[dct.DenialType]string{
		dct.Malformed: "security", dct.InvalidSignature: "security", dct.AttenuationViolation: "security",
		dct.Revoked: "policy", dct.Expired: "policy", dct.BudgetExceeded: "policy", dct.CapabilityNotGranted: "policy",
		gate.RateLimited: "policy", gate.DependencyPending: "policy", gate.ApprovalDeclined: "policy", gate.ApprovalUnavailable: "policy",
		gate.ToolNotPinned:    "capability",
		gate.StoreUnavailable: "runtime", gate.StoreReset: "runtime", gate.EvidenceUnavailable: "runtime",
	}
	for typ, cat := range want {
		if got, ok := ldp.CodeCategory(string(typ)); !ok || got != cat || category(string(typ)) != cat {
			t.Errorf("%s: %q %v, want %q", typ, got, ok, cat)
		}
	}
	// AVP-Sig's reasons are listed exactly (rtldp3 #5): its store's
	// failure is the delegate's, the rest the request's; a made-up
	// signature_* code is in no table.
	for _, r := range []avpsig.Reason{avpsig.ReasonMissing, avpsig.ReasonMalformed, avpsig.ReasonWrongKey, avpsig.ReasonStale,
		avpsig.ReasonBodyTampered, avpsig.ReasonQueryTampered, avpsig.ReasonBadSignature, avpsig.ReasonReplayed, avpsig.ReasonBusy,
		avpsig.ReasonUnavailable} {
		want := "security"
		if r == avpsig.ReasonUnavailable {
			want = "runtime"
		}
		if got, ok := ldp.CodeCategory(string(r)); !ok || got != want {
			t.Errorf("%s: %q %v, want %q", r, got, ok, want)
		}
	}
	if c, ok := ldp.CodeCategory("signature_tool_crashed"); ok {
		t.Errorf("signature_tool_crashed has category %q", c)
	}
}
