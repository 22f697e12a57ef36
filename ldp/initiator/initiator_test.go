package initiator

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/ldp"
	"github.com/delegateos/delegateos/reputation"
)

func TestTextInput(t *testing.T) {
	for in, want := range map[string]string{
		`{"task_type":"x","instruction":"do it"}`: `"do it"`,
		`{"task_type":"x"}`:                       `"{\"task_type\":\"x\"}"`,
		`"already text"`:                          `"already text"`,
	} {
		if got := string(TextInput(json.RawMessage(in), "")); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	if got := string(TextInput(json.RawMessage(`{"instruction":"x"}`), "given")); got != `"given"` {
		t.Errorf("text given: %s", got)
	}
}

func TestNarrowToken(t *testing.T) {
	root, _ := identity.Generate(rand.Reader, "root")
	agent, _ := identity.Generate(rand.Reader, "agent")
	parent, err := dct.Create(dct.CreateParams{Issuer: root, Delegatee: agent.ID(),
		Capabilities: []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/**"}},
		ContractID:   "ct_000000000000", DelegationID: "del_000000000001", MaxChainDepth: 2,
		MaxBudgetMicrocents: 1000, ExpiresAt: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	card := &ldp.IdentityCard{DelegateID: "ldp:delegate:x", Metadata: map[string]string{ldp.MetaCapabilityPrefix + "s": "docs:read:/reports/**"}}
	tok, del, err := NarrowToken(parent, agent, card, "s", nil, 500, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := dct.NewVerifier(dct.Options{Roots: []string{root.ID()}})
	scope, err := v.Verify(tok.String(), dct.Request{Namespace: "docs", Action: "read", Resource: "/reports/q3"})
	if err != nil {
		t.Fatal(err)
	}
	if scope.Delegatee != agent.ID() || scope.RemainingBudgetMicrocents != 500 || scope.DelegationID != del || scope.MaxChainDepth != scope.ChainDepth {
		t.Fatalf("%+v", scope)
	}
	// The parent expires in a minute: so does the narrowed token.
	if exp, _ := time.Parse(time.RFC3339, scope.ExpiresAt); exp.After(time.Now().Add(time.Minute)) {
		t.Fatalf("expires %s, after the parent", scope.ExpiresAt)
	}
	if _, err := v.Verify(tok.String(), dct.Request{Namespace: "docs", Action: "read", Resource: "/private"}); err == nil {
		t.Fatal("the narrowed token reads outside the skill's capability")
	}
	if _, _, err := NarrowToken(parent, agent, &ldp.IdentityCard{DelegateID: "ldp:delegate:y"}, "s", nil, 0, time.Hour); !errors.Is(err, ErrNoCapability) {
		t.Fatalf("no capability: %v", err)
	}
}

func TestRecordOutcome(t *testing.T) {
	w, err := reputation.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	delegate, _ := identity.Generate(rand.Reader, "delegate")
	observer, _ := identity.Generate(rand.Reader, "observer")
	result := func(verified bool) *ldp.Envelope {
		return &ldp.Envelope{Body: &ldp.TaskResult{TaskID: "t", Provenance: ldp.Provenance{Verified: verified, VerificationStatus: "tool_verified"}}}
	}
	failed := func(code, category string) *ldp.Envelope {
		return &ldp.Envelope{Body: &ldp.TaskFailed{TaskID: "t", Error: ldp.LdpError{Code: code, Category: category}}}
	}
	score := 0.4
	for _, c := range []struct {
		reply  *ldp.Envelope
		score  *float64
		want   float64
		record bool
	}{
		{result(true), nil, 0, false}, // the delegate's own claim (red team, issue 21)
		{result(true), &score, 0.4, true},
		{result(false), nil, 0, false},
		{result(false), &score, 0.4, true},
		{failed("X", "runtime"), nil, 0, true},
		{failed("capability_not_granted", "policy"), nil, 0, false},
		{failed("SEMANTIC_FRAME_INVALID", "quality"), nil, 0, false},
		// The delegate chooses the category: a code no table gives it,
		// or a category its code does not have, is its own failure.
		{failed("X", "policy"), nil, 0, true},
		{failed("budget_exceeded", "security"), nil, 0, true},
		{failed("TOOL_ERROR", "policy"), nil, 0, true},
	} {
		sig, why, err := RecordOutcome(w, observer.DID(), delegate.DID(), "ldp:delegate:d", "skill", "t", c.reply, c.score, nil)
		if err != nil || (sig != nil) != c.record || (sig != nil && sig.Score != c.want) || (sig == nil && why == "") {
			t.Errorf("%+v: %+v %q %v", c.reply.Body, sig, why, err)
		}
	}
	if _, _, err := RecordOutcome(w, delegate.DID(), delegate.DID(), "ldp:delegate:d", "skill", "t", result(true), nil, nil); !errors.Is(err, ErrSelfRating) {
		t.Fatalf("self-rating: %v", err)
	}
}
