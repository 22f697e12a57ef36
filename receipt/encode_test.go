package receipt

import (
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/canon"
)

// The hand-written encoder writes exactly what canon.Marshal writes, for
// every kind, with and without optional members and proof, and for
// strings JSON escapes in several ways.
func TestEncodeIsCanonical(t *testing.T) {
	for _, b := range oddBodies() {
		want, err := canon.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encode(b)
		if err != nil || string(got) != string(want) {
			t.Errorf("encode:\n got %s\nwant %s", got, want)
		}
	}
}

// oddBodies are receipts of every kind, with and without their optional
// members, their strings needing escapes of every sort.
func oddBodies() []Body {
	odd := "a<b>&c\"d\\e\u0001\u001f\u007f\u2028é😀\xff"
	proof := &Proof{Type: ProofType, Cryptosuite: Cryptosuite, VerificationMethod: "did:key:z6Mk#z6Mk", ProofValue: "z" + odd}
	pos := Position{Seq: 3, Prev: strings.Repeat("a", 64)}
	bodies := []Body{
		&CheckpointBody{SchemaVersion: KindCheckpoint, Length: 2, Head: odd, Recovered: new(false), At: odd, Checkpoint: odd, Position: pos, Proof: proof},
		&DecisionBody{SchemaVersion: KindDecision},
		&DecisionBody{SchemaVersion: KindDecision, AuditID: odd, AgentDID: odd, Action: odd, Resource: odd, Environment: odd,
			Decision: odd, Reason: odd, PayloadHash: odd, PolicyContextHash: odd, Method: odd,
			Capability: &Capability{Namespace: odd, Action: "a", Resource: "</script>"}, Chain: []string{odd, "x"},
			DelegationPath: []string{"d1", odd}, ContractID: odd, DenialType: odd, DenialDetail: odd, CostReserved: 1 << 52,
			Enforced: true, DecidedAt: odd, ArgumentsHash: odd, Arguments: []byte(`{"z": [1.50, 2e3, "\u00e9"], "a": null}`),
			ArgumentsJSON: odd, ArgumentsOmitted: odd,
			ApprovalID: odd, ApprovalReceiptHash: odd, Position: pos, Proof: proof},
		&ExecutionBody{SchemaVersion: KindExecution},
		&ExecutionBody{SchemaVersion: KindExecution, ReceiptID: odd, GateAuditID: odd, AgentDID: odd, Action: odd, Resource: odd,
			Environment: odd, Status: odd, Adapter: odd, Operation: odd, ParamsHash: odd, RequestHash: odd, ResponseHash: odd,
			DecisionReceiptHash: odd, StartedAt: odd, CompletedAt: odd, DurationMicros: 7, CostCommitted: 9, Outcome: odd,
			EvaluatorVersion: odd, Result: []byte(`{"content":[{"type":"text","text":"hi <b>"}]}`), ApprovalReceiptHash: odd,
			ResultJSON: odd, ResultOmitted: odd,
			Position: pos, Proof: proof},
		&HumanApprovalBody{SchemaVersion: KindHumanApproval},
		&HumanApprovalBody{SchemaVersion: KindHumanApproval, ApprovalID: odd, GateAuditID: odd, RequesterAgentDID: odd,
			PrincipalDID: odd, Action: odd, Resource: odd, Environment: odd, RiskClass: odd, GateReason: odd, Decision: odd,
			Reason: odd, RequestedAt: odd, DecidedAt: odd, ExpiresAt: odd, EvaluatorVersion: odd, Cost: 3,
			DelegationReceiptID: odd, DelegationReceiptHash: odd, DecisionReceiptHash: odd, AnsweredBy: odd, AnswerAction: odd,
			AnswerHash: odd, RequestHash: odd, Position: pos, Proof: proof},
		&CheckpointBody{SchemaVersion: KindCheckpointV2, Length: 2, Head: odd, Final: true, Recovered: new(false), At: odd, Position: pos, Proof: proof},
		&CheckpointBody{SchemaVersion: KindCheckpointV2, Length: 2, Head: odd, Recovered: new(true), At: odd, Position: pos, Proof: proof},
		&CheckpointBody{SchemaVersion: KindCheckpointV1, Length: 2, Head: odd, Final: true, At: odd, Position: pos, Proof: proof},
	}
	return bodies
}

// withProof inserts the proof where encode would write it.
func TestWithProof(t *testing.T) {
	p := &Proof{Type: ProofType, Cryptosuite: Cryptosuite, VerificationMethod: "v", ProofValue: "z1"}
	for _, b := range []Body{
		&DecisionBody{SchemaVersion: KindDecision, Reason: "r", PolicyContextHash: "h"},
		&CheckpointBody{SchemaVersion: KindCheckpointV2},
		&CheckpointBody{SchemaVersion: KindCheckpointV2, Recovered: new(true)},
		&ExecutionBody{SchemaVersion: KindExecution},
	} {
		unsigned, at, err := encodeAt(b)
		if err != nil {
			t.Fatal(err)
		}
		*b.proof() = p
		want, err := canon.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := withProof(unsigned, at, p); string(got) != string(want) {
			t.Errorf("withProof:\n got %s\nwant %s", got, want)
		}
	}
}

// The Encoder (straight into the batch for decisions and executions)
// writes what canon.Marshal writes of a body without its proof.
func TestEncoderAppendIsCanonical(t *testing.T) {
	var e Encoder
	prefix := []byte("earlier entries\n")
	for _, b := range oddBodies() {
		*b.proof() = nil
		want, err := canon.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second time with the encoder's buffers reused
			got, err := e.Append(append([]byte(nil), prefix...), b)
			if err != nil || string(got) != string(prefix)+string(want) {
				t.Fatalf("Append:\n got %s\nwant %s%s", got, prefix, want)
			}
		}
	}
}
