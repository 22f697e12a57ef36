package ldp_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http/httptest"

	"github.com/delegateos/delegateos/ldp"
)

// upper is an Executor: the daemon's runs tasks through the gate.
type upper struct{}

func (upper) Execute(_ context.Context, t *ldp.Task) (*ldp.Outcome, error) {
	var f struct {
		Instruction string `json:"instruction"`
	}
	json.Unmarshal(t.Submit.Input, &f)
	out, _ := json.Marshal(map[string]string{"answer": "done: " + f.Instruction})
	return &ldp.Outcome{Output: out}, nil
}

func key(b byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = b
	return ed25519.NewKeyFromSeed(seed)
}

// A delegate and an initiator on loopback, both signing with Ed25519 and
// checking each other: discovery, HELLO, SESSION_PROPOSE, one task in a
// semantic frame, SESSION_CLOSE.
func Example() {
	ctx := context.Background()
	delegate := &ldp.Responder{Exec: upper{}, Key: key(1), Verifier: &ldp.Verifier{}}
	srv := httptest.NewServer(&ldp.Handler{Responder: delegate})
	defer srv.Close()
	delegate.Card = &ldp.IdentityCard{
		DelegateID: "ldp:delegate:upper", Name: "Upper", ModelFamily: "none", ModelVersion: "1",
		TrustDomain: ldp.TrustDomain{Name: "lab"}, ContextWindow: 1000,
		Capabilities:          []ldp.Capability{{Name: "reasoning"}},
		SupportedPayloadModes: []ldp.PayloadMode{ldp.ModeSemanticFrame, ldp.ModeText},
		Endpoint:              srv.URL,
	}

	router := &ldp.Client{ID: "ldp:delegate:router", TrustDomain: "lab", Key: key(2), Verifier: &ldp.Verifier{}}
	card, err := router.Discover(ctx, srv.URL)
	if err != nil {
		panic(err)
	}
	s, err := router.Open(ctx, srv.URL, card.DelegateID, ldp.SessionConfig{}, nil, "", "")
	if err != nil {
		panic(err)
	}
	fmt.Println("session in", s.Payload.Mode, "falling back to", s.Payload.Fallback)
	reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: "t1", Skill: "reasoning",
		Input: json.RawMessage(`{"task_type":"analysis","instruction":"compare"}`)}, "", nil, nil)
	if err != nil {
		panic(err)
	}
	r := reply.Body.(*ldp.TaskResult)
	fmt.Println(string(r.Output), "by", r.Provenance.ProducedBy, "in", r.Provenance.PayloadModeUsed, "verified:", r.Provenance.Verified)
	fmt.Println(s.Close(ctx, "done"))
	// Output:
	// session in semantic_frame falling back to [text]
	// {"answer":"done: compare"} by ldp:delegate:upper in semantic_frame verified: false
	// <nil>
}
