package attest

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/delegateos/delegateos/verify"
)

func TestCreate(t *testing.T) {
	a := testAttestation(t)
	if err := a.Verify(); err != nil {
		t.Fatal(err)
	}
	want := `{"childAttestations":[],"contractId":"ct_000000000001","createdAt":"2026-01-01T01:00:00.000Z",` +
		`"delegationId":"del_000000000001","id":"att_a1b2c3d4e5f6","principal":"` + aliceKey.ID() + `",` +
		`"result":{"costMicrocents":1000,"durationMs":1500,"output":{"pages":3,"summary":"Quantum computers factor integers."},"success":true},` +
		`"signature":"` + a.Signature + `","type":"completion","version":"0.1"}`
	if got := string(mustMarshal(t, a)); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestCreateHashOnly(t *testing.T) {
	p := testParams()
	p.HashOnly = true
	p.Output = json.RawMessage("{ \"pages\": 3,\n \"summary\": \"Quantum computers factor integers.\" }")
	a := create(t, aliceKey, p)
	if a.Result.Output != nil || a.Result.OutputHash == nil {
		t.Fatalf("output %s, hash %v: want only the hash", a.Result.Output, a.Result.OutputHash)
	}
	h, err := OutputHash([]byte(testOutput))
	if err != nil {
		t.Fatal(err)
	}
	if *a.Result.OutputHash != h {
		t.Errorf("hash %s, want %s", *a.Result.OutputHash, h)
	}
	if !strings.HasPrefix(h, "blake2b-256:") || len(h) != len("blake2b-256:")+64 {
		t.Errorf("hash %q is not blake2b-256: and 64 hex digits", h)
	}
	if err := a.Verify(); err != nil {
		t.Fatal(err)
	}
	p.Output = nil
	if _, err := Create(aliceKey, p, t1); err == nil {
		t.Error("HashOnly without output: want an error")
	}
}

// The hash is of the canonical output: formatting and spelling do not
// change it, any change of value does.
func TestOutputHash(t *testing.T) {
	h := func(s string) string {
		t.Helper()
		v, err := OutputHash([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	base := h(`{"a":1000,"b":"é"}`)
	for _, same := range []string{`{ "b": "\u00e9", "a": 1E3 }`, "{\"a\":1000.0,\n\"b\":\"é\"}"} {
		if h(same) != base {
			t.Errorf("%s hashes differently", same)
		}
	}
	for _, other := range []string{`{"a":1001,"b":"é"}`, `{"a":1000,"b":"e"}`, `{"a":1000}`, `[1000,"é"]`} {
		if h(other) == base {
			t.Errorf("%s hashes the same", other)
		}
	}
	if got, want := h(`null`), "blake2b-256:"; !strings.HasPrefix(got, want) {
		t.Errorf("null hashes to %s", got)
	}
	for _, bad := range []string{``, `{`, `{"a":1,"a":2}`, `1e400`, `12345678901234567890`} {
		if _, err := OutputHash([]byte(bad)); err == nil {
			t.Errorf("OutputHash(%s): want an error", bad)
		}
	}
}

func TestCreateDefaults(t *testing.T) {
	p := testParams()
	p.ID = ""
	p.Rand = bytes.NewReader([]byte{1, 2, 3, 4, 5, 6})
	p.Output = nil
	p.Success = false
	before := time.Now().Truncate(time.Millisecond)
	a, err := Create(aliceKey, p, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != "att_010203040506" || a.Type != Completion || a.ChildAttestations == nil || a.Result.Output != nil {
		t.Errorf("got %+v", a)
	}
	made, _ := a.Created()
	if made.Before(before) || made.After(time.Now()) {
		t.Errorf("createdAt %s is not now", a.CreatedAt)
	}
	if b := mustMarshal(t, a); bytes.Contains(b, []byte(`"output"`)) || !bytes.Contains(b, []byte(`"childAttestations":[]`)) {
		t.Errorf("%s", b)
	}
}

func TestCreateRefuses(t *testing.T) {
	score := func(f float64) *float64 { return &f }
	tests := []struct {
		name   string
		change func(p *CreateParams)
	}{
		{"bad id", func(p *CreateParams) { p.ID = "att_XYZ" }},
		{"contract id", func(p *CreateParams) { p.ContractID = "ct_1" }},
		{"empty delegation id", func(p *CreateParams) { p.DelegationID = "" }},
		{"long delegation id", func(p *CreateParams) { p.DelegationID = strings.Repeat("d", MaxStringLen+1) }},
		{"type", func(p *CreateParams) { p.Type = "vibes" }},
		{"negative cost", func(p *CreateParams) { p.CostMicrocents = -1 }},
		{"cost over 2^53-1", func(p *CreateParams) { p.CostMicrocents = 1 << 53 }},
		{"negative duration", func(p *CreateParams) { p.DurationMs = -1 }},
		{"output not JSON", func(p *CreateParams) { p.Output = json.RawMessage(`{"a"`) }},
		{"output 1e400", func(p *CreateParams) { p.Output = json.RawMessage(`[1e400]`) }},
		{"output duplicate member", func(p *CreateParams) { p.Output = json.RawMessage(`{"a":1,"a":1}`) }},
		{"outcome without method", func(p *CreateParams) { p.Outcome = &VerificationOutcome{Passed: true} }},
		{"outcome score over 1", func(p *CreateParams) { p.Outcome = &VerificationOutcome{Method: "schema_match", Score: score(1.5)} }},
		{"outcome score negative", func(p *CreateParams) { p.Outcome = &VerificationOutcome{Method: "schema_match", Score: score(-0.1)} }},
		{"child id", func(p *CreateParams) { p.Children = []string{"att_1"} }},
		{"child is itself", func(p *CreateParams) { p.Children = []string{p.ID} }},
		{"child twice", func(p *CreateParams) { p.Children = []string{idN("att_", 1), idN("att_", 1)} }},
		{"too many children", func(p *CreateParams) {
			for i := range MaxChildren + 1 {
				p.Children = append(p.Children, idN("att_", i+1))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testParams()
			tt.change(&p)
			if _, err := Create(aliceKey, p, t1); err == nil {
				t.Error("want an error")
			}
		})
	}
	if _, err := Create(nil, testParams(), t1); err == nil {
		t.Error("nil key: want an error")
	}
	if _, err := Create(aliceKey, testParams(), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)); err == nil {
		t.Error("year 10000: want an error")
	}
}

func TestCreateAtLimits(t *testing.T) {
	p := testParams()
	for i := range MaxChildren {
		p.Children = append(p.Children, idN("att_", i+1))
	}
	p.CostMicrocents = 1<<53 - 1
	p.DelegationID = strings.Repeat("d", MaxStringLen)
	zero, one := 0.0, 1.0
	p.Outcome = &VerificationOutcome{Method: "composite", Passed: true, Score: &one}
	a := create(t, aliceKey, p)
	back, err := Parse(mustMarshal(t, a))
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(); err != nil {
		t.Fatal(err)
	}
	p.Outcome.Score = &zero
	create(t, aliceKey, p)
}

func TestNewOutcome(t *testing.T) {
	s := 0.75
	o := NewOutcome("composite", verify.CheckResult{Passed: true, Score: &s, Details: "3 of 4"})
	s = 0
	if o.Method != "composite" || !o.Passed || *o.Score != 0.75 || *o.Details != "3 of 4" {
		t.Errorf("got %+v", o)
	}
	o = NewOutcome("schema_match", verify.CheckResult{})
	if o.Score != nil || o.Details != nil || o.Passed {
		t.Errorf("got %+v: want no score and no details", o)
	}
}

func TestNewID(t *testing.T) {
	id, err := NewID(bytes.NewReader([]byte{0xab, 0xcd, 0xef, 0, 1, 2}))
	if err != nil || id != "att_abcdef000102" || !ValidID(id) {
		t.Errorf("NewID = %q, %v", id, err)
	}
	if _, err := NewID(iotest.ErrReader(errors.New("no entropy"))); err == nil {
		t.Error("failing reader: want an error")
	}
	for _, bad := range []string{"", "att_", "att_abcdef00010", "att_abcdef0001023", "att_ABCDEF000102", "ct_abcdef000102", "att_abcdef00010g"} {
		if ValidID(bad) {
			t.Errorf("ValidID(%q) = true", bad)
		}
	}
}
