package ldp

import (
	"crypto/ed25519"
	"encoding/json"
	"testing"
	"time"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/timestamp"
)

var t0 = time.Date(2026, 3, 9, 10, 0, 0, 0, time.UTC)

func testKey(n byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = n
	return ed25519.NewKeyFromSeed(seed)
}

func testDID(n byte) string {
	return identity.DIDFromPublicKey(testKey(n).Public().(ed25519.PublicKey))
}

func clock(t time.Time) func() time.Time { return func() time.Time { return t } }

func ptr[T any](v T) *T { return &v }

// submitEnvelope is a TASK_SUBMIT with every optional member set.
func submitEnvelope() *Envelope {
	return &Envelope{
		MessageID: "msg-005",
		SessionID: "550e8400-e29b-41d4-a716-446655440000",
		From:      "ldp:delegate:router-alpha",
		To:        "ldp:delegate:qwen3-8b-reasoning",
		Body: &TaskSubmit{
			TaskID: "task-001",
			Skill:  "reasoning",
			Input:  json.RawMessage(`{"task_type":"analysis","instruction":"Compare","labels":["a","b"],"n":3,"deep":{"ok":true}}`),
			Contract: &DelegationContract{
				ContractID:      "c-1",
				Objective:       "Summarize",
				SuccessCriteria: []string{"<=300 words"},
				Policy: PolicyEnvelope{FailurePolicy: FailClosed, Budget: &BudgetPolicy{MaxTokens: ptr(uint64(5000)), MaxCostUSD: ptr(0.05)},
					SafetyConstraints: []string{"no pii"}, MaxDelegationDepth: ptr(uint32(2))},
				Deadline:  "2026-03-09T11:00:00.000Z",
				CreatedAt: "2026-03-09T10:00:00.000Z",
			},
		},
		PayloadMode: ModeSemanticFrame,
		Timestamp:   timestamp.Format(t0),
		Nonce:       "a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4",
		DelegateOS:  &DelegateOSMember{DCT: "eyJ0b2tlbiI6MX0", Format: "dct-jws"},
	}
}

// roundTrip marshals e and parses it back, as a receiver sees it.
func roundTrip(t *testing.T, e *Envelope) *Envelope {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseEnvelope(b)
	if err != nil {
		t.Fatalf("parse %s: %v", b, err)
	}
	return got
}

func principalOf(k ed25519.PrivateKey) string {
	return identity.PrincipalID(k.Public().(ed25519.PublicKey))
}
