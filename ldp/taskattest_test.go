package ldp

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/cputime"
)

// TestTaskAttestation: a Responder with a key names a signed attestation
// of each result in provenance and stores it; the initiator's Submit
// checks it against the exchange; every member changed (and signed again
// by the delegate, envelope and attestation) is refused, as is an
// attestation by another key or a result naming one it does not carry.
func TestTaskAttestation(t *testing.T) {
	d := newDelegate(t, 1, "")
	store := &TaskAttestationMemory{}
	d.resp.Attestations = store
	c := newClient(2)
	s, err := c.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{}, nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	sub := &TaskSubmit{TaskID: "task-001", Skill: "echo", Input: json.RawMessage(`"attest me"`)}
	sent := &Envelope{SessionID: s.ID, To: s.Peer, Body: sub, PayloadMode: ModeText}
	reply, err := c.Send(ctx, d.srv.URL, sent, "", s.Signer)
	if err != nil {
		t.Fatal(err)
	}
	a, err := VerifyResult(sent, reply)
	if err != nil || a == nil {
		t.Fatalf("attestation: %v %+v", err, reply.Body)
	}
	p := reply.Body.(*TaskResult).Provenance
	if p.DelegateOS.AttestationID != a.ID || a.Signer != testDID(1) || a.Initiator != c.ID || a.InitiatorSigner != testDID(2) ||
		a.TaskID != "task-001" || a.Skill != "echo" || a.SessionID != s.ID {
		t.Fatalf("attestation %+v", a)
	}
	stored, err := store.Get(a.ID)
	if err != nil || stored.Signature != a.Signature {
		t.Fatalf("stored: %v", err)
	}
	// Submit checks it too.
	if _, err := s.Submit(ctx, &TaskSubmit{TaskID: "task-002", Skill: "echo", Input: json.RawMessage(`"x"`)}, ModeText, nil, nil); err != nil {
		t.Fatal(err)
	}
	if ids, _ := store.List(); len(ids) != 2 {
		t.Fatalf("stored %v", ids)
	}

	// Forgeries: the reply changed, its attestation changed to agree or
	// not, both signed again by the delegate's own key.
	forge := func(change func(r *TaskResult, a *TaskAttestation), signer byte) *Envelope {
		t.Helper()
		r := roundTrip(t, reply)
		res := r.Body.(*TaskResult)
		dos := *res.Provenance.DelegateOS
		res.Provenance.DelegateOS = &dos
		var att TaskAttestation
		json.Unmarshal(dos.Attestation, &att)
		change(res, &att)
		if err := att.Sign(testKey(signer)); err != nil {
			t.Fatal(err)
		}
		dos.Attestation, _ = json.Marshal(&att)
		r.Provenance = &res.Provenance
		if err := SignEd25519(r, testKey(1)); err != nil {
			t.Fatal(err)
		}
		return roundTrip(t, r)
	}
	for name, f := range map[string]func(r *TaskResult, a *TaskAttestation){
		"output changed":      func(r *TaskResult, a *TaskAttestation) { r.Output = json.RawMessage(`{"echo":"other"}`) },
		"another task":        func(r *TaskResult, a *TaskAttestation) { a.TaskID = "task-009" },
		"another skill":       func(r *TaskResult, a *TaskAttestation) { a.Skill = "stream" },
		"another session":     func(r *TaskResult, a *TaskAttestation) { a.SessionID = "s-other" },
		"another initiator":   func(r *TaskResult, a *TaskAttestation) { a.Initiator = "ldp:delegate:other" },
		"another request":     func(r *TaskResult, a *TaskAttestation) { a.Request = HashPrefix + strings.Repeat("0", 64) },
		"another input":       func(r *TaskResult, a *TaskAttestation) { a.InputHash = HashPrefix + strings.Repeat("1", 64) },
		"cost in provenance":  func(r *TaskResult, a *TaskAttestation) { r.Provenance.DelegateOS.CostChargedMicrocents = ptr(int64(5)) },
		"cost in attestation": func(r *TaskResult, a *TaskAttestation) { a.CostChargedMicrocents = ptr(int64(5)) },
		"receipts":            func(r *TaskResult, a *TaskAttestation) { a.ReceiptHashes = []string{strings.Repeat("a", 64)} },
		"verified claimed": func(r *TaskResult, a *TaskAttestation) {
			r.Provenance.Verified = true
			r.Provenance.VerificationStatus = "tool_verified"
		},
		"another initiator key": func(r *TaskResult, a *TaskAttestation) { a.InitiatorSigner = testDID(3) },
	} {
		if _, err := VerifyResult(sent, forge(f, 1)); !errors.Is(err, ErrTaskAttestation) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := VerifyResult(sent, forge(func(*TaskResult, *TaskAttestation) {}, 3)); err == nil || !strings.Contains(err.Error(), "signer") {
		t.Errorf("signed by another key: %v", err)
	}
	if _, err := VerifyResult(sent, forge(func(*TaskResult, *TaskAttestation) {}, 1)); err != nil {
		t.Errorf("unchanged: %v", err)
	}
	// Named but not carried; carried but altered after signing.
	r := roundTrip(t, reply)
	r.Body.(*TaskResult).Provenance.DelegateOS.Attestation = nil
	if _, err := VerifyResult(sent, r); !errors.Is(err, ErrTaskAttestation) {
		t.Errorf("not carried: %v", err)
	}
	raw := reply.Body.(*TaskResult).Provenance.DelegateOS.Attestation
	bad := strings.Replace(string(raw), `"task_id":"task-001"`, `"task_id":"task-00X"`, 1)
	if _, err := ParseTaskAttestation([]byte(bad)); !errors.Is(err, ErrTaskAttestation) || bad == string(raw) {
		t.Errorf("tampered: %v", err)
	}
	if _, err := ParseTaskAttestation([]byte(strings.Replace(string(raw), `{`, `{"extra":1,`, 1))); err == nil {
		t.Error("an unknown member was taken")
	}
	// A store never replaces one attestation by another of the same ID.
	other := *a
	other.TaskID = "task-003"
	other.Sign(testKey(1))
	if err := store.Put(&other); err == nil {
		t.Error("a different attestation replaced a stored one")
	}
}

// FuzzParseTaskAttestation: an attestation that parses verifies, and its
// canonical form parses to the same attestation.
func FuzzParseTaskAttestation(f *testing.F) {
	a := &TaskAttestation{ID: TaskAttestationPrefix + strings.Repeat("0", 24), Version: TaskAttestationVersion, Delegate: "ldp:delegate:a",
		Initiator: "ldp:delegate:b", SessionID: "s", TaskID: "t", Skill: "echo", Request: HashPrefix + strings.Repeat("a", 64),
		InputHash: HashPrefix + strings.Repeat("b", 64), OutputHash: HashPrefix + strings.Repeat("c", 64), VerificationStatus: "unverified",
		CostChargedMicrocents: ptr(int64(100)), ReceiptHashes: []string{strings.Repeat("d", 64)}, CreatedAt: "2026-03-09T10:00:00.000Z"}
	if a.Sign(testKey(1)) == nil {
		b, _ := json.Marshal(a)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ParseTaskAttestation(data)
		if err != nil {
			return
		}
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseTaskAttestation(b)
		if err != nil || again.Signature != a.Signature || again.ID != a.ID {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// TestTaskAttestationVerifiedPerBytes: a TASK_RESULT's attestation is
// parsed and verified once for the same bytes, never for other bytes: a
// copy in the envelope's provenance that differs from the result's is
// verified on its own, and an attestation changed after the envelope was
// parsed is verified again by VerifyResult.
func TestTaskAttestationVerifiedPerBytes(t *testing.T) {
	d := newDelegate(t, 1, "")
	c := newClient(2)
	s, err := c.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{}, nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	sent := &Envelope{SessionID: s.ID, To: s.Peer, Body: &TaskSubmit{TaskID: "task-001", Skill: "echo", Input: json.RawMessage(`"x"`)}, PayloadMode: ModeText}
	reply, err := c.Send(ctx, d.srv.URL, sent, "", s.Signer)
	if err != nil {
		t.Fatal(err)
	}
	raw := string(reply.Raw())
	att := string(reply.Body.(*TaskResult).Provenance.DelegateOS.Attestation)
	if strings.Count(raw, att) != 2 || reply.Provenance == nil {
		t.Fatalf("the reply does not carry the attestation in both provenances: %s", raw)
	}
	bad := strings.Replace(att, `"task_id":"task-001"`, `"task_id":"task-00X"`, 1)
	// The result's copy altered, or the envelope's: either is refused.
	first := strings.Replace(raw, att, bad, 1)
	i := strings.LastIndex(raw, att)
	second := raw[:i] + bad + raw[i+len(att):]
	for name, data := range map[string]string{"the result's": first, "the envelope's": second} {
		if _, err := ParseEnvelope([]byte(data)); err == nil || !strings.Contains(err.Error(), ErrTaskAttestation.Error()) {
			t.Errorf("%s attestation altered: %v", name, err)
		}
	}
	// Verified at parse; changed afterwards, it is verified again.
	r, err := ParseEnvelope(reply.Raw())
	if err != nil {
		t.Fatal(err)
	}
	a, err := VerifyResult(sent, r)
	if err != nil {
		t.Fatal(err)
	}
	a.TaskID = "task-009" // a copy: the next check is not changed by it
	if _, err := VerifyResult(sent, r); err != nil {
		t.Fatalf("after the caller changed its copy: %v", err)
	}
	r.Body.(*TaskResult).Provenance.DelegateOS.Attestation = json.RawMessage(bad)
	if _, err := VerifyResult(sent, r); !errors.Is(err, ErrTaskAttestation) {
		t.Errorf("altered after parsing: %v", err)
	}
}

// testAttestation is an attestation with every member set.
func testAttestation() *TaskAttestation {
	return &TaskAttestation{ID: "ldpatt_4008fdc301d3fa578ee174cd", Version: TaskAttestationVersion, Delegate: "ldp:delegate:bench",
		Signer: testDID(1), Initiator: "ldp:delegate:router", InitiatorSigner: testDID(2), SessionID: "s-1", TaskID: "t-1",
		Skill: "echo", Request: HashPrefix + strings.Repeat("a", 64), InputHash: HashPrefix + strings.Repeat("b", 64),
		ContractID: "c-1", DelegationID: "del_1", OutputHash: HashPrefix + strings.Repeat("c", 64), Verified: true,
		VerificationStatus: "tool_verified", CostChargedMicrocents: ptr(int64(1 << 52)), ReceiptHashes: []string{strings.Repeat("d", 64), strings.Repeat("e", 64)},
		CreatedAt: "2026-03-09T10:00:00.000Z", Signature: "sig"}
}

// TestTaskAttestationSignedInput: the signed input written directly is
// canon.Marshal's (the profile's definition), with members left out, and
// text JSON writers escape differently.
func TestTaskAttestationSignedInput(t *testing.T) {
	for name, change := range map[string]func(a *TaskAttestation){
		"all": func(*TaskAttestation) {},
		"minimal": func(a *TaskAttestation) {
			a.InitiatorSigner, a.ContractID, a.DelegationID, a.CostChargedMicrocents, a.ReceiptHashes = "", "", "", nil, nil
		},
		"empty list and zero cost": func(a *TaskAttestation) {
			a.ReceiptHashes, a.CostChargedMicrocents, a.Verified = []string{}, ptr(int64(0)), false
		},
		"text": func(a *TaskAttestation) {
			a.Skill, a.TaskID, a.SessionID = "<a&b>\u2028\u2029\x7f", "\"q\\\t\x01", "é😀\xff"
		},
		"cost out of range": func(a *TaskAttestation) { a.CostChargedMicrocents = ptr(int64(1 << 60)) },
	} {
		a := testAttestation()
		change(a)
		got, err1 := a.signedInput()
		want, err2 := a.signedInputMarshal()
		if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
			t.Errorf("%s:\n%s (%v)\nwant\n%s (%v)", name, got, err1, want, err2)
		}
	}
}

// FuzzTaskAttestationSignedInput holds the signed input written directly
// to canon.Marshal's for any text and cost.
func FuzzTaskAttestationSignedInput(f *testing.F) {
	f.Add("t-1", "echo", "<&>\u2028", int64(5), true, "")
	f.Add("", "\x00\xff", "é", int64(-1), false, "x")
	f.Fuzz(func(t *testing.T, task, skill, session string, cost int64, verified bool, receipt string) {
		a := testAttestation()
		a.TaskID, a.Skill, a.SessionID, a.CostChargedMicrocents, a.Verified = task, skill, session, &cost, verified
		if receipt != "" {
			a.ReceiptHashes = append(a.ReceiptHashes, receipt)
		}
		got, err1 := a.signedInput()
		want, err2 := a.signedInputMarshal()
		if (err1 == nil) != (err2 == nil) || err1 == nil && !bytes.Equal(got, want) {
			t.Fatalf("%s (%v)\nwant\n%s (%v)", got, err1, want, err2)
		}
	})
}

// BenchmarkTaskAttestationSignedInput: /direct is signedInput, /marshal
// encoding/json and JCS (what Sign and Verify ran before).
func BenchmarkTaskAttestationSignedInput(b *testing.B) {
	a := testAttestation()
	for name, f := range map[string]func() ([]byte, error){"direct": a.signedInput, "marshal": a.signedInputMarshal} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			defer cputime.Report(b)()
			for b.Loop() {
				if _, err := f(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
