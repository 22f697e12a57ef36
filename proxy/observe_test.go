package proxy

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/delegateos/delegateos/gate"
)

// observeSession is testSession in observe mode or not, with the lines it
// logs.
func observeSession(t *testing.T, observe bool) (s *session, logs *observer.ObservedLogs, toClient, toServer *bytes.Buffer) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	toClient, toServer = &bytes.Buffer{}, &bytes.Buffer{}
	s = testSession(t, zap.New(core), toClient, toServer)
	s.cfg.Observe = observe
	return s, logs, toClient, toServer
}

// leafSpent is what the session token's delegation has spent.
func leafSpent(t *testing.T, s *session) int64 {
	t.Helper()
	scope, err := s.cfg.Gate.Verifier.VerifyChain(s.cfg.SessionToken, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	levels := gate.BudgetLevels(scope)
	return s.cfg.Gate.Budget.Spent(levels[len(levels)-1].Key)
}

// A refusal in observe mode is logged as it would be, marked "enforced":
// false, and forwarded; its answer is relayed and settles nothing; the
// same request without observe mode is refused and not forwarded.
func TestObserveForwardsRefusals(t *testing.T) {
	frames := []struct{ name, frame, reason, upstreamHas string }{
		{"not granted", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"write","arguments":{}}}`, "capability_not_granted", `"name":"write"`},
		{"resource", `{"jsonrpc":"2.0","id":"b","method":"resources/read","params":{"uri":"file:///etc/passwd"}}`, "capability_not_granted", `"uri":"file:///etc/passwd"`},
		{"unreadable _delegateos", `{"jsonrpc":"2.0","id":"c","method":"prompts/get","params":{"name":"p","_delegateos":7}}`, "malformed_token", `"name":"p"}`},
	}
	for _, observe := range []bool{true, false} {
		for _, f := range frames {
			s, logs, toClient, toServer := observeSession(t, observe)
			s.clientFrame([]byte(f.frame))
			s.toServer.flush()
			s.toClient.flush()
			lines := logs.FilterMessage("decision").All()
			if len(lines) != 1 {
				t.Fatalf("observe=%v %s: %d decision lines, want 1: %v", observe, f.name, len(lines), logs.All())
			}
			m := lines[0].ContextMap()
			if m["allowed"] != false || m["reason"] != f.reason || m["detail"] == "" {
				t.Errorf("observe=%v %s: the line %v", observe, f.name, m)
			}
			if !observe {
				if _, ok := m["enforced"]; ok || toServer.Len() != 0 || !strings.Contains(toClient.String(), `"code":-32001`) {
					t.Errorf("%s without observe mode: line %v, upstream got %q, client got %q", f.name, m, toServer.String(), toClient.String())
				}
				continue
			}
			if m["enforced"] != false {
				t.Errorf("%s: the observed line has enforced = %v", f.name, m["enforced"])
			}
			if toClient.Len() != 0 {
				t.Errorf("%s: the client was answered %q", f.name, toClient.String())
			}
			up := toServer.String()
			if !strings.Contains(up, `"id":1,`) || !strings.Contains(up, f.upstreamHas) || strings.Contains(up, "_delegateos") {
				t.Errorf("%s: the upstream got %q", f.name, up)
			}
			s.fromServer(strings.NewReader(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}` + "\n"))
			if !strings.Contains(toClient.String(), `"result"`) || s.pending.len() != 0 {
				t.Errorf("%s: the client got %q; %d pending", f.name, toClient.String(), s.pending.len())
			}
			if n := len(logs.FilterMessage("decision").All()); n != 1 {
				t.Errorf("%s: %d decision lines after the answer, want the one", f.name, n)
			}
		}
	}
}

// An observed refusal holds no reservation: its answer, its cancellation
// and the end of the session charge it nothing and log nothing more. An
// allowed call is charged as usual.
func TestObserveChargesNothing(t *testing.T) {
	s, logs, toClient, _ := observeSession(t, true)
	s.cfg.Gate.Policy.DefaultCost = 100
	s.clientFrame([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`))
	s.fromServer(strings.NewReader(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}` + "\n"))
	if got := leafSpent(t, s); got != 100 {
		t.Fatalf("the allowed call was charged %d, want 100", got)
	}
	// Fill the budget to 50 short of its 1e9 limit: the next call does not fit.
	scope, _ := s.cfg.Gate.Verifier.VerifyChain(s.cfg.SessionToken, time.Now())
	r, err := s.cfg.Gate.Budget.Reserve(gate.BudgetLevels(scope), 1_000_000_000-150)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cfg.Gate.Budget.Commit(r, r.Cost()); err != nil {
		t.Fatal(err)
	}
	// Answered, cancelled, and left pending when the session ends.
	s.clientFrame([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`))
	s.clientFrame([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{}}}`))
	s.clientFrame([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`))
	s.clientFrame([]byte(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{}}}`))
	s.fromServer(strings.NewReader(`{"jsonrpc":"2.0","id":2,"result":{"content":[]}}` + "\n"))
	s.failPending("gone")
	if got := leafSpent(t, s); got != 1_000_000_000-50 {
		t.Fatalf("spent %d after the observed refusals, want %d", got, 1_000_000_000-50)
	}
	var reasons []string
	for _, e := range logs.FilterMessage("decision").All() {
		m := e.ContextMap()
		reasons = append(reasons, m["reason"].(string))
		if m["allowed"] == false && m["enforced"] != false {
			t.Errorf("a refusal's line lacks enforced false: %v", m)
		}
	}
	if strings.Join(reasons, " ") != "granted budget_exceeded budget_exceeded budget_exceeded" {
		t.Errorf("decision lines %v; want one per call", reasons)
	}
	if !strings.Contains(toClient.String(), `"id":4,"error"`) {
		t.Errorf("the call left pending was not answered: %q", toClient.String())
	}
}

// What the relay refuses before the gate, because it cannot read the
// request as the upstream would, is refused in observe mode too.
func TestObserveStillRefusesUnreadable(t *testing.T) {
	s, _, toClient, toServer := observeSession(t, true)
	for _, f := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a","URI":"file:///etc/passwd"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","name":"write"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"arguments":{}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"admin/shutdown"}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"write"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_delegateos":7}}`,
	} {
		s.clientFrame([]byte(f))
	}
	s.toServer.flush()
	s.toClient.flush()
	if toServer.Len() != 0 {
		t.Errorf("the upstream got %q", toServer.String())
	}
	for _, id := range []string{`"id":1,`, `"id":2,`, `"id":3,`, `"id":4,`, `"id":5,`} {
		if !strings.Contains(toClient.String(), id+`"error":{"code":-326`) {
			t.Errorf("%s was not refused: %q", id, toClient.String())
		}
	}
}

// In observe mode a list is relayed unfiltered, and a line names what
// the token's view would have hidden; a list it would show whole gets no
// line. Unreadable results are still refused.
func TestObserveListsUnfiltered(t *testing.T) {
	s, logs, toClient, _ := observeSession(t, true)
	s.clientFrame([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	s.clientFrame([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
	s.clientFrame([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`))
	long := strings.Repeat("é", 200)
	list := `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo"},{"name":"write"},{"name":7},{"name":"` + long + `"}]}}`
	whole := `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"echo"}]}}`
	twice := `{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"echo","name":"write"}]}}`
	s.fromServer(strings.NewReader(list + "\n" + whole + "\n" + twice + "\n"))
	got := strings.Split(strings.TrimSuffix(toClient.String(), "\n"), "\n")
	if len(got) != 3 || got[0] != list || got[1] != whole ||
		!strings.Contains(got[2], `"id":3,"error"`) {
		t.Fatalf("the client got:\n%s", toClient.String())
	}
	lines := logs.FilterMessage("list not filtered").All()
	if len(lines) != 1 {
		t.Fatalf("%d list lines: %v", len(lines), logs.All())
	}
	m := lines[0].ContextMap()
	hidden, _ := m["would_hide"].([]any)
	if m["method"] != "tools/list" || m["upstream"] != int64(4) || m["would_show"] != int64(1) || m["enforced"] != false || len(hidden) != 3 ||
		hidden[0] != "write" || hidden[1] != "7" || hidden[2] != strings.Repeat("é", maxHiddenName/2)+"…" {
		t.Errorf("the line: %v", m)
	}
	if n := len(logs.FilterMessage("list filtered").All()); n != 0 {
		t.Errorf("%d lines say a list was filtered", n)
	}
}

// Never more than maxHiddenLogged names, and none cut inside a character.
func TestWouldHideBounded(t *testing.T) {
	var hidden []string
	for range maxHiddenLogged + 5 {
		hidden = wouldHide(hidden, "x")
	}
	if len(hidden) != maxHiddenLogged {
		t.Errorf("%d names kept", len(hidden))
	}
	name := "a" + strings.Repeat("€", maxHiddenName)
	if got := wouldHide(nil, name)[0]; got != "a"+strings.Repeat("€", (maxHiddenName-1)/3)+"…" {
		t.Errorf("cut to %q", got)
	}
}
