package ldp

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// specFlow is the spec's §3.3 and §5.2 flow, one envelope per message type.
var specFlow = []string{
	`{"message_id":"msg-001","session_id":"","from":"ldp:delegate:router-alpha","to":"ldp:delegate:qwen3-8b-reasoning","body":{"type":"HELLO","delegate_id":"ldp:delegate:router-alpha","supported_modes":["semantic_frame","text"]},"payload_mode":"text","timestamp":"2026-03-09T10:00:00Z","provenance":null}`,
	`{"message_id":"msg-002","session_id":"","from":"ldp:delegate:qwen3-8b-reasoning","to":"ldp:delegate:router-alpha","body":{"type":"CAPABILITY_MANIFEST","capabilities":{"skills":["reasoning","analysis"],"supported_modes":["semantic_frame","text"],"max_concurrent_tasks":4}},"payload_mode":"text","timestamp":"2026-03-09T10:00:01Z","provenance":null}`,
	`{"message_id":"msg-003","session_id":"","from":"ldp:delegate:router-alpha","to":"ldp:delegate:qwen3-8b-reasoning","body":{"type":"SESSION_PROPOSE","config":{"preferred_payload_modes":["semantic_frame","text"],"ttl_secs":3600,"required_trust_domain":"research.internal"}},"payload_mode":"text","timestamp":"2026-03-09T10:00:02Z","provenance":null}`,
	`{"message_id":"msg-004","session_id":"550e8400-e29b-41d4-a716-446655440000","from":"ldp:delegate:qwen3-8b-reasoning","to":"ldp:delegate:router-alpha","body":{"type":"SESSION_ACCEPT","session_id":"550e8400-e29b-41d4-a716-446655440000","negotiated_mode":"semantic_frame","fallback_chain":["text"]},"payload_mode":"text","timestamp":"2026-03-09T10:00:03Z","provenance":null}`,
	`{"message_id":"msg-004r","session_id":"","from":"ldp:delegate:qwen3-8b-reasoning","to":"ldp:delegate:router-alpha","body":{"type":"SESSION_REJECT","reason":"untrusted","error":{"code":"SESSION_REJECTED","category":"policy","message":"untrusted","severity":"fatal","retryable":false}},"payload_mode":"text","timestamp":"2026-03-09T10:00:03Z","provenance":null}`,
	`{"message_id":"msg-005","session_id":"550e8400-e29b-41d4-a716-446655440000","from":"ldp:delegate:router-alpha","to":"ldp:delegate:qwen3-8b-reasoning","body":{"type":"TASK_SUBMIT","task_id":"task-001","skill":"reasoning","input":{"task_type":"analysis","instruction":"Analyze the tradeoffs...","expected_output_format":"structured_analysis"}},"payload_mode":"semantic_frame","timestamp":"2026-03-09T10:00:04Z","provenance":null}`,
	`{"message_id":"msg-005u","session_id":"550e8400-e29b-41d4-a716-446655440000","from":"ldp:delegate:qwen3-8b-reasoning","to":"ldp:delegate:router-alpha","body":{"type":"TASK_UPDATE","task_id":"task-001","progress":0.5,"message":"halfway"},"payload_mode":"semantic_frame","timestamp":"2026-03-09T10:00:05Z","provenance":null}`,
	`{"message_id":"msg-006","session_id":"550e8400-e29b-41d4-a716-446655440000","from":"ldp:delegate:qwen3-8b-reasoning","to":"ldp:delegate:router-alpha","body":{"type":"TASK_RESULT","task_id":"task-001","output":{"analysis":"..."},"provenance":{"produced_by":"ldp:delegate:qwen3-8b","model_version":"qwen3-8b-2026.01","payload_mode_used":"semantic_frame","confidence":0.84,"verified":true}},"payload_mode":"semantic_frame","timestamp":"2026-03-09T10:00:09Z","provenance":{"produced_by":"ldp:delegate:qwen3-8b","model_version":"qwen3-8b-2026.01","payload_mode_used":"semantic_frame","confidence":0.84,"verified":true,"session_id":"550e8400-e29b-41d4-a716-446655440000","timestamp":"2026-03-09T10:00:09Z"}}`,
	`{"message_id":"msg-007","session_id":"550e8400-e29b-41d4-a716-446655440000","from":"ldp:delegate:qwen3-8b-reasoning","to":"ldp:delegate:router-alpha","body":{"type":"TASK_FAILED","task_id":"task-002","error":{"code":"PAYLOAD_MODE","category":"quality","message":"semantic_frame validation failed","severity":"warning","retryable":true}},"payload_mode":"semantic_frame","timestamp":"2026-03-09T10:00:10Z","provenance":null}`,
	`{"message_id":"msg-008","session_id":"550e8400-e29b-41d4-a716-446655440000","from":"ldp:delegate:router-alpha","to":"ldp:delegate:qwen3-8b-reasoning","body":{"type":"TASK_CANCEL","task_id":"task-002"},"payload_mode":"text","timestamp":"2026-03-09T10:00:11Z","provenance":null}`,
	`{"message_id":"msg-009","session_id":"550e8400-e29b-41d4-a716-446655440000","from":"ldp:delegate:router-alpha","to":"ldp:delegate:qwen3-8b-reasoning","body":{"type":"ATTESTATION","claim":{"quality":0.9},"evidence":["run-1"]},"payload_mode":"text","timestamp":"2026-03-09T10:00:12Z","provenance":null}`,
	`{"message_id":"msg-010","session_id":"550e8400-e29b-41d4-a716-446655440000","from":"ldp:delegate:router-alpha","to":"ldp:delegate:qwen3-8b-reasoning","body":{"type":"SESSION_CLOSE","reason":null},"payload_mode":"text","timestamp":"2026-03-09T10:00:13Z","provenance":null}`,
}

// TestParseSpecFlow reads every message type of the spec's flow and checks
// that writing it back and reading it again gives the same envelope.
func TestParseSpecFlow(t *testing.T) {
	seen := map[MessageType]bool{}
	for _, s := range specFlow {
		e, err := ParseEnvelope([]byte(s))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		seen[e.Body.Type()] = true
		b1, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		e2, err := ParseEnvelope(b1)
		if err != nil {
			t.Fatalf("re-encoded %s: %v", b1, err)
		}
		b2, _ := json.Marshal(e2)
		if string(b1) != string(b2) {
			t.Fatalf("round trip changed\n%s\n%s", b1, b2)
		}
		if string(e.Raw()) != s {
			t.Fatal("Raw is not the bytes received")
		}
	}
	if len(seen) != 12 {
		t.Fatalf("flow covers %d message types, want 12", len(seen))
	}
	e, _ := ParseEnvelope([]byte(specFlow[2]))
	c := e.Body.(*SessionPropose).Config
	if *c.TTLSecs != 3600 || c.RequiredTrustDomain != "research.internal" || len(c.PreferredPayloadModes) != 2 {
		t.Fatalf("config %+v", c)
	}
}

// TestParseRefuses: every malformed or ambiguous envelope is refused as
// malformed, with the reason named.
func TestParseRefuses(t *testing.T) {
	hello := specFlow[0]
	submit := specFlow[5]
	rep := func(s, old, new string) string {
		if !strings.Contains(s, old) {
			t.Fatalf("%q not in %s", old, s)
		}
		return strings.Replace(s, old, new, 1)
	}
	cases := []struct{ name, in, want string }{
		{"not JSON", `{`, "EOF"},
		{"array", `[]`, "not a JSON object"},
		{"trailing data", hello + `{}`, "trailing"},
		{"duplicate member", rep(hello, `"from":`, `"from":"x","from":`), "duplicate"},
		{"duplicate body member", rep(hello, `"delegate_id":`, `"delegate_id":"x","delegate_id":`), "duplicate"},
		{"case-folded member", rep(hello, `"from":`, `"From":`), "from is missing"},
		{"unknown member", rep(hello, `"provenance":null`, `"provenance":null,"extra":1`), "extra"},
		{"unknown body member", rep(hello, `"delegate_id":`, `"extra":1,"delegate_id":`), "extra"},
		{"another type's member set", rep(hello, `"delegate_id":`, `"task_id":"t","delegate_id":`), "task_id"},
		{"missing member", rep(hello, `"to":"ldp:delegate:qwen3-8b-reasoning",`, ``), "to is missing"},
		{"null member", rep(hello, `"session_id":""`, `"session_id":null`), "session_id is missing"},
		{"empty from", rep(hello, `"from":"ldp:delegate:router-alpha"`, `"from":""`), "from is empty"},
		{"unknown type", rep(hello, `"HELLO"`, `"HOWDY"`), "unknown message type"},
		{"no type", rep(hello, `"type":"HELLO",`, ``), "type is missing"},
		{"unknown mode", rep(hello, `"payload_mode":"text"`, `"payload_mode":"morse"`), "unknown payload_mode"},
		{"unknown supported mode", rep(hello, `["semantic_frame","text"]`, `["semantic_frame","morse"]`), "morse"},
		{"repeated mode", rep(hello, `["semantic_frame","text"]`, `["text","text"]`), "twice"},
		{"bad timestamp", rep(hello, `2026-03-09T10:00:00Z`, `2026-03-09 10:00:00`), "timestamp"},
		{"timestamp without zone", rep(hello, `2026-03-09T10:00:00Z`, `2026-03-09T10:00:00`), "timestamp"},
		{"pipe in ID", rep(hello, `"msg-001"`, `"msg|001"`), "'|'"},
		{"control character", rep(hello, `"msg-001"`, `"msg\u0007"`), "control"},
		{"bidi override", rep(hello, `"msg-001"`, `"msg\u202e"`), "control"},
		{"unpaired surrogate", rep(hello, `"msg-001"`, `"msg\ud800"`), "surrogate"},
		{"invalid UTF-8", rep(hello, `msg-001`, "msg\xff"), "UTF-8"},
		{"long ID", rep(hello, `"msg-001"`, `"`+strings.Repeat("m", MaxIDLen+1)+`"`), "at most"},
		{"empty nonce", rep(hello, `"provenance":null`, `"provenance":null,"nonce":""`), "nonce is empty"},
		{"empty signature", rep(hello, `"provenance":null`, `"provenance":null,"signature":""`), "signature is empty"},
		{"unknown algorithm", rep(hello, `"provenance":null`, `"provenance":null,"signature":"x","signature_algorithm":"rot13"`), "unknown signature_algorithm"},
		{"signer without ed25519", rep(hello, `"provenance":null`, `"provenance":null,"signer":"did:key:z6Mk"`), "signer"},
		{"delegateos on HELLO", rep(hello, `"provenance":null`, `"provenance":null,"delegateos":{"dct":"x"}`), "delegateos"},
		{"delegateos without token", rep(submit, `"provenance":null`, `"provenance":null,"delegateos":{"dct":""}`), "dct"},
		{"submit without input", rep(submit, `"input":{"task_type":"analysis","instruction":"Analyze the tradeoffs...","expected_output_format":"structured_analysis"}`, `"input":null`), "input is missing"},
		{"submit without skill", rep(submit, `"skill":"reasoning",`, ``), "skill is empty"},
		{"result without provenance", rep(specFlow[7], `"provenance":{"produced_by":"ldp:delegate:qwen3-8b","model_version":"qwen3-8b-2026.01","payload_mode_used":"semantic_frame","confidence":0.84,"verified":true}}`, `"provenance":null}`), "produced_by"},
		{"receipt hash not a digest", rep(specFlow[7], `"verified":true}`, `"verified":true,"delegateos":{"receipt_hashes":["\u001b[31mred"]}}`), "receipt_hashes"},
		{"failed receipt hash not a digest", rep(specFlow[8], `"retryable":true}}`, `"retryable":true},"delegateos":{"receipt_hashes":["ABC"]}}`), "receipt_hashes"},
		{"confidence above 1", rep(specFlow[7], `"confidence":0.84`, `"confidence":1.5`), "0.0–1.0"},
		{"progress below 0", rep(specFlow[6], `"progress":0.5`, `"progress":-0.5`), "0.0–1.0"},
		{"unknown category", rep(specFlow[8], `"category":"quality"`, `"category":"vibes"`), "category"},
		{"ttl zero", rep(specFlow[2], `"ttl_secs":3600`, `"ttl_secs":0`), "ttl_secs"},
		{"ttl negative", rep(specFlow[2], `"ttl_secs":3600`, `"ttl_secs":-1`), "ttl_secs"},
		{"ttl too long", rep(specFlow[2], `"ttl_secs":3600`, `"ttl_secs":9999999`), "ttl_secs"},
		{"unknown config member", rep(specFlow[2], `"ttl_secs":3600`, `"ttl_secs":3600,"budget":1`), "budget"},
		{"too deep", rep(specFlow[10], `{"quality":0.9}`, strings.Repeat("[", 70)+strings.Repeat("]", 70)), "deeper"},
		{"too large", rep(specFlow[10], `{"quality":0.9}`, `"`+strings.Repeat("a", MaxEnvelopeSize)+`"`), "bytes, at most"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseEnvelope([]byte(c.in))
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want malformed", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q", err, c.want)
			}
		})
	}
}

// TestParsePythonFlatBody: the Python SDK's flat body, with every other
// type's member null, reads as the typed body.
func TestParsePythonFlatBody(t *testing.T) {
	in := `{"message_id":"m","session_id":"s","from":"a","to":"b","body":{"type":"TASK_CANCEL","task_id":"t","delegate_id":null,"supported_modes":null,"capabilities":null,"config":null,"session_id":null,"negotiated_mode":null,"reason":null,"skill":null,"input":null,"contract":null,"progress":null,"message":null,"output":null,"provenance":null,"error":null,"claim":null,"evidence":null},"payload_mode":"text","timestamp":"2026-03-09T10:00:00.123456+00:00","provenance":null,"signature":null,"signature_algorithm":null,"nonce":null}`
	e, err := ParseEnvelope([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := e.Body.(*TaskCancel); !ok || b.TaskID != "t" || e.Nonce != "" || e.Signature != "" {
		t.Fatalf("%+v %+v", e, e.Body)
	}
}

// TestBuiltEnvelopeCheck: Check holds a locally built envelope to the rules
// ParseEnvelope applies.
func TestBuiltEnvelopeCheck(t *testing.T) {
	e := submitEnvelope()
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
	e.Body.(*TaskSubmit).Skill = "a|b"
	if err := e.Check(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v", err)
	}
	e = submitEnvelope()
	e.Body = &Hello{DelegateID: "x"}
	if err := e.Check(); err == nil || !strings.Contains(err.Error(), "delegateos") {
		t.Fatalf("err = %v", err)
	}
	if _, err := json.Marshal(&Envelope{}); err == nil {
		t.Fatal("an envelope without body marshals")
	}
}
