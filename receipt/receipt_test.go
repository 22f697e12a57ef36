package receipt_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/receiptschema"
	"github.com/delegateos/delegateos/receipt"
)

func signer(t testing.TB) (*receipt.Signer, *identity.Keypair) {
	t.Helper()
	k, err := identity.FromSeed(bytes.Repeat([]byte{7}, 32), "proxy")
	if err != nil {
		t.Fatal(err)
	}
	return receipt.NewSigner(k), k
}

var at = time.Date(2026, 11, 25, 21, 0, 0, 0, time.UTC)

// samples are one receipt body of each kind, as the proxy and the audit
// log make them.
func samples(t testing.TB) []receipt.Body {
	t.Helper()
	opts := &receipt.Options{PolicyHash: strings.Repeat("0a", 32)}
	allowed := &receipt.Decision{
		Method: "tools/call", Target: "echo", Allowed: true, Enforced: true, CostReserved: 5,
		Requested: &dct.Capability{Namespace: "mcp", Action: "echo", Resource: "*"},
		Payload:   sha256.Sum256([]byte("frame")), HasArguments: true, ArgumentsHash: sha256.Sum256([]byte("{}")), At: at,
	}
	refused := &receipt.Decision{
		Method: "resources/read", Target: "file:///etc/passwd", Enforced: true,
		DenialType: "capability_not_granted", DenialDetail: "not granted", Payload: sha256.Sum256([]byte("frame2")), At: at,
	}
	db := allowed.Body(opts)
	allowed.Signed([32]byte(bytes.Repeat([]byte{0x11}, 32))) // "1111…"
	exec := (&receipt.Execution{Decision: allowed, Request: sha256.Sum256([]byte("fwd")), Response: sha256.Sum256([]byte("resp")),
		HasResponse: true, CostCommitted: 5, Started: at, Completed: at.Add(3 * time.Millisecond), Outcome: "result"}).Body(opts)
	approval := &receipt.HumanApprovalBody{
		ApprovalID: "appr-1", GateAuditID: db.AuditID, Action: "mcp.tools.call", Resource: "echo", RiskClass: "write",
		GateReason: "approval: required", Decision: receipt.ApprovalApproved, Reason: "accepted by the user",
		RequestedAt: "2026-11-25T21:00:00.000Z", DecidedAt: "2026-11-25T21:00:05.000Z", Cost: 5,
		AnsweredBy: "ts-approver/1.0.0", AnswerAction: "accept", AnswerHash: strings.Repeat("c", 64), RequestHash: "sha256:" + strings.Repeat("d", 64),
	}
	receipt.FillHumanApproval(approval)
	ckpt := &receipt.CheckpointBody{SchemaVersion: receipt.KindCheckpointV2, Length: 3, Head: strings.Repeat("ab", 32), At: "2026-11-25T21:00:06.000Z", Final: true,
		Recovered: new(false), Position: receipt.Position{Seq: 4, Prev: strings.Repeat("ab", 32)}}
	recovered := &receipt.CheckpointBody{SchemaVersion: receipt.KindCheckpointV2, Length: 3, Head: strings.Repeat("ab", 32), At: "2026-11-25T21:00:06.000Z",
		Recovered: new(true), Position: receipt.Position{Seq: 4, Prev: strings.Repeat("ab", 32)}}
	v1 := &receipt.CheckpointBody{SchemaVersion: receipt.KindCheckpointV1, Length: 3, Head: strings.Repeat("ab", 32), At: "2026-11-25T21:00:06.000Z", Final: true,
		Position: receipt.Position{Seq: 4, Prev: strings.Repeat("ab", 32)}}
	return []receipt.Body{db, refused.Body(opts), exec, approval, ckpt, recovered, v1}
}

func TestSignParseVerify(t *testing.T) {
	s, k := signer(t)
	for _, b := range samples(t) {
		out, err := s.Sign(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := receiptschema.Validate(out); err != nil {
			t.Errorf("%s does not match its schema: %v\n%s", out[:40], err, out)
		}
		if err := receiptschema.Validate(bytes.Replace(out, []byte(`{`), []byte(`{"aaa":1,`), 1)); err == nil {
			t.Errorf("the schema of %s accepts an unknown member", out[:40])
		}
		r, err := receipt.Parse(out)
		if err != nil {
			t.Fatalf("parse %s: %v", out, err)
		}
		if err := r.Verify([]string{k.DID()}); err != nil {
			t.Errorf("verify %s: %v", r.Kind, err)
		}
		if r.Signer != k.DID() || r.Digest != receipt.Digest(out) {
			t.Errorf("%s: signer %s digest %s", r.Kind, r.Signer, r.Digest)
		}
		// The /2 construction: Ed25519 over JCS(body without proof).
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		proof := m["proof"].(map[string]any)
		delete(m, "proof")
		unsigned, err := canon.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := identity.Base58Decode(strings.TrimPrefix(proof["proofValue"].(string), "z"))
		if err != nil || !ed25519.Verify(k.Public(), unsigned, sig) {
			t.Errorf("%s: proofValue is not Ed25519 over JCS(body without proof)", r.Kind)
		}
		if vm := proof["verificationMethod"].(string); vm != k.DID()+"#"+strings.TrimPrefix(k.DID(), "did:key:") {
			t.Errorf("verificationMethod %s", vm)
		}
	}
}

func TestParseStrict(t *testing.T) {
	s, _ := signer(t)
	good, err := s.Sign(samples(t)[0])
	if err != nil {
		t.Fatal(err)
	}
	str := string(good)
	cases := map[string]string{
		"re-cased member":  strings.Replace(str, `"decision":`, `"Decision":`, 1),
		"duplicate member": strings.Replace(str, `{"action":`, `{"action":"x","action":`, 1),
		"whitespace":       strings.Replace(str, `,"`, `, "`, 1),
		"unknown member":   strings.Replace(str, `{"action":`, `{"aaa":1,"action":`, 1),
		"trailing data":    str + " {}",
		"not json":         "decision",
		"unknown kind":     strings.Replace(str, `decision_receipt/2`, `decision_receipt/9`, 1),
		"no proof":         str[:strings.Index(str, `,"proof":`)] + str[strings.Index(str, `,"reason":`):],
		"bad proof type":   strings.Replace(str, `"DataIntegrityProof"`, `"Ed25519Signature2020"`, 1),
		"bad hash":         strings.Replace(str, `"payload_hash":"sha256:`, `"payload_hash":"sha512:`, 1),
		"escaped letter":   strings.Replace(str, `"mcp.tools.call"`, `"mcp.tools.c\u0061ll"`, 1),
		"too large":        str[:len(str)-1] + `,"zz":"` + strings.Repeat("x", receipt.MaxBytes) + `"}`,
	}
	for name, in := range cases {
		if _, err := receipt.Parse([]byte(in)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	// One changed value: parses, but the signature fails.
	r, err := receipt.Parse([]byte(strings.Replace(str, `"resource":"echo"`, `"resource":"ecHo"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Verify(nil); !errors.Is(err, receipt.ErrBadSignature) {
		t.Fatalf("edited receipt: %v", err)
	}
}

// A checkpoint/2 has exactly one more member than a checkpoint/1,
// "recovered", a boolean: present in every /2, absent from every /1, never
// with final, and signed like the rest.
func TestParseCheckpointRecovered(t *testing.T) {
	s, _ := signer(t)
	sign := func(b receipt.Body) string {
		out, err := s.Sign(b)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	ckpt, recovered, v1 := sign(samples(t)[4]), sign(samples(t)[5]), sign(samples(t)[6])
	for _, in := range []string{ckpt, recovered, v1} {
		if _, err := receipt.Parse([]byte(in)); err != nil {
			t.Fatalf("%v: %s", err, in)
		}
	}
	if r, _ := receipt.Parse([]byte(recovered)); !r.Body.(*receipt.CheckpointBody).IsRecovered() {
		t.Fatal("the recovered checkpoint does not read as recovered")
	}
	cases := map[string]string{
		"/2 without recovered":  strings.Replace(ckpt, `"recovered":false,`, ``, 1),
		"/1 with recovered":     strings.Replace(v1, `"head":`, `"recovered":false,"head":`, 1),
		"/1 recovered true":     strings.Replace(v1, `"head":`, `"recovered":true,"head":`, 1),
		"recovered not a bool":  strings.Replace(recovered, `"recovered":true`, `"recovered":1`, 1),
		"recovered as string":   strings.Replace(recovered, `"recovered":true`, `"recovered":"true"`, 1),
		"recovered null":        strings.Replace(recovered, `"recovered":true`, `"recovered":null`, 1),
		"recovered re-cased":    strings.Replace(recovered, `"recovered":true`, `"Recovered":true`, 1),
		"recovered twice":       strings.Replace(recovered, `"recovered":true`, `"recovered":true,"recovered":true`, 1),
		"recovered and final":   strings.Replace(recovered, `"final":false`, `"final":true`, 1),
		"/1 relabelled /2":      strings.Replace(v1, receipt.KindCheckpointV1, receipt.KindCheckpointV2, 1),
		"recovered of no entry": strings.Replace(strings.Replace(recovered, `"length":3`, `"length":0`, 1), `"audit_seq":4`, `"audit_seq":1`, 1),
	}
	for name, in := range cases {
		if _, err := receipt.Parse([]byte(in)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	// Flipping the flag either way parses, but the signature fails.
	periodic := samples(t)[4].(*receipt.CheckpointBody)
	periodic.Final = false
	for _, in := range []string{strings.Replace(recovered, `"recovered":true`, `"recovered":false`, 1), strings.Replace(sign(periodic), `"recovered":false`, `"recovered":true`, 1)} {
		r, err := receipt.Parse([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Verify(nil); !errors.Is(err, receipt.ErrBadSignature) {
			t.Fatalf("flipped recovered: %v", err)
		}
	}
	b := samples(t)[5].(*receipt.CheckpointBody)
	b.Final = true
	if _, err := receipt.Parse([]byte(sign(b))); err == nil {
		t.Fatal("a signed final recovered checkpoint parsed")
	}
}

func TestSignHumanApproval(t *testing.T) {
	s, k := signer(t)
	b := samples(t)[3].(*receipt.HumanApprovalBody)
	out, err := s.SignHumanApproval(b)
	if err != nil {
		t.Fatal(err)
	}
	r, err := receipt.Parse(out)
	if err != nil || r.Verify([]string{k.DID()}) != nil || r.Kind != receipt.KindHumanApproval {
		t.Fatalf("%v %s", err, out)
	}
	b.Decision = "MAYBE"
	if _, err := s.SignHumanApproval(b); err == nil || !strings.Contains(err.Error(), "decision must be one of") {
		t.Fatalf("bad decision signed: %v", err)
	}
}

func TestUUIDURN(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		u := receipt.NewUUIDURN()
		if seen[u] || len(u) != 45 || u[23] != '4' {
			t.Fatalf("uuid %s", u)
		}
		seen[u] = true
	}
}

func TestClip(t *testing.T) {
	short := strings.Repeat("é", receipt.MaxTextBytes/2)
	if receipt.Clip(short) != short {
		t.Fatal("a text within the limit was clipped")
	}
	long := strings.Repeat("é", receipt.MaxTextBytes)
	c := receipt.Clip(long)
	if len(c) > receipt.MaxTextBytes+64 || !utf8.ValidString(c) || !strings.HasSuffix(c, fmt.Sprintf("…[clipped: %d bytes]", len(long))) {
		t.Fatalf("clipped: %d bytes, valid %v, ends %q", len(c), utf8.ValidString(c), c[len(c)-40:])
	}
}

// The approval receipt's own hashes are checked like the others.
func TestHumanApprovalHashes(t *testing.T) {
	for _, c := range []struct {
		answer, request, want string
	}{
		{strings.Repeat("C", 64), "", "answer_hash must be 64 lower-case hex digits"},
		{"", strings.Repeat("d", 64), "request_hash must be sha256: and 64 lower-case hex digits"},
		{"", "sha256:" + strings.Repeat("d", 63), "request_hash must be sha256: and 64 lower-case hex digits"},
	} {
		b := samples(t)[3].(*receipt.HumanApprovalBody)
		b.AnswerHash, b.RequestHash = c.answer, c.request
		if err := receipt.CheckHumanApproval(b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("answer_hash %q request_hash %q: %v, want %q", c.answer, c.request, err, c.want)
		}
	}
}

// Arguments in clear are the JSON text exactly as forwarded, or marked
// omitted with a known reason; never both, never the older form as well.
func TestClearArguments(t *testing.T) {
	s, _ := signer(t)
	text := `{"n":9007199254740993,"big":1e400,"s":"\ud800"}`
	d := &receipt.Decision{Method: "tools/call", Target: "echo", Allowed: true, Enforced: true, At: at,
		HasArguments: true, ArgumentsHash: sha256.Sum256([]byte(text)), Arguments: []byte(text)}
	b := d.Body(&receipt.Options{PolicyHash: strings.Repeat("0a", 32), IncludeArguments: true})
	if b.ArgumentsJSON != text || b.ArgumentsOmitted != "" {
		t.Fatalf("arguments_json %q, omitted %q", b.ArgumentsJSON, b.ArgumentsOmitted)
	}
	parse := func(b *receipt.DecisionBody) error {
		out, err := s.Sign(b)
		if err != nil {
			t.Fatal(err)
		}
		r, err := receipt.Parse(out)
		if err == nil && r.Body.(*receipt.DecisionBody).ArgumentsJSON != b.ArgumentsJSON {
			t.Fatalf("arguments_json read back as %q", r.Body.(*receipt.DecisionBody).ArgumentsJSON)
		}
		return err
	}
	if err := parse(b); err != nil {
		t.Fatal(err)
	}
	d.Arguments = []byte("{\"s\":\"\xff\"}")
	if b := d.Body(&receipt.Options{PolicyHash: strings.Repeat("0a", 32), IncludeArguments: true}); b.ArgumentsJSON != "" || b.ArgumentsOmitted != receipt.OmittedInvalidUTF8 {
		t.Fatalf("arguments that are not UTF-8: arguments_json %q, omitted %q", b.ArgumentsJSON, b.ArgumentsOmitted)
	}
	for name, edit := range map[string]func(*receipt.DecisionBody){
		"both":           func(b *receipt.DecisionBody) { b.ArgumentsOmitted = receipt.OmittedTooLarge },
		"older as well":  func(b *receipt.DecisionBody) { b.Arguments = []byte(`{}`) },
		"unknown reason": func(b *receipt.DecisionBody) { b.ArgumentsJSON, b.ArgumentsOmitted = "", "secret" },
	} {
		c := *b
		c.Proof = nil
		edit(&c)
		if err := parse(&c); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
