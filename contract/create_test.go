package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestCreate(t *testing.T) {
	c := testContract(t)
	if err := c.Verify(); err != nil {
		t.Fatal(err)
	}
	if c.ID != "ct_a1b2c3d4e5f6" || c.Version != "0.1" || c.Issuer != rootKey.ID() {
		t.Errorf("id %q version %q issuer %q", c.ID, c.Version, c.Issuer)
	}
	if c.CreatedAt != "2026-01-01T00:00:00.000Z" || c.Constraints.Deadline != "2026-01-02T00:00:00.000Z" {
		t.Errorf("createdAt %q deadline %q", c.CreatedAt, c.Constraints.Deadline)
	}
	// Free-form members are stored canonically.
	if got, want := string(c.Task.Inputs), `{"flag":true,"limits":{"n":10,"ratio":0.1,"tags":["a","b"]},"none":null,"query":"quantum computing"}`; got != want {
		t.Errorf("inputs\n got %s\nwant %s", got, want)
	}
	if d, err := c.Deadline(); err != nil || !d.Equal(t0.Add(24*time.Hour)) {
		t.Errorf("Deadline() = %v, %v", d, err)
	}
}

func TestCreateDefaults(t *testing.T) {
	p := testParams()
	p.ID, p.Inputs, p.RequiredCapabilities = "", nil, nil
	p.Rand = bytes.NewReader([]byte{0xde, 0xad, 0xbe, 0xef, 0x00, 0x01})
	before := time.Now().Truncate(time.Millisecond)
	p.Deadline = time.Now().Add(time.Hour)
	c, err := Create(rootKey, p, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != "ct_deadbeef0001" {
		t.Errorf("id %q, want one read from Rand", c.ID)
	}
	if string(c.Task.Inputs) != "{}" || c.Constraints.RequiredCapabilities == nil {
		t.Errorf("inputs %s, requiredCapabilities %v: want {} and []", c.Task.Inputs, c.Constraints.RequiredCapabilities)
	}
	created, _ := c.Created()
	if created.Before(before) || created.After(time.Now()) {
		t.Errorf("createdAt %s is not now", c.CreatedAt)
	}
	if b := mustMarshal(t, c); !bytes.Contains(b, []byte(`"requiredCapabilities":[]`)) {
		t.Errorf("%s: want an empty requiredCapabilities array", b)
	}
}

// The issuer may be named by did:key; the contract records the principal ID.
func TestCreateIssuerDID(t *testing.T) {
	p := testParams()
	p.Issuer = rootKey.DID()
	c, err := Create(rootKey, p, t0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Issuer != rootKey.ID() {
		t.Errorf("issuer %q, want the principal ID %q", c.Issuer, rootKey.ID())
	}
	for _, other := range []string{aliceKey.DID(), aliceKey.ID(), "did:key:zNotAKey", "nonsense"} {
		p.Issuer = other
		if _, err := Create(rootKey, p, t0); err == nil {
			t.Errorf("issuer %q with root's key: want an error", other)
		}
	}
}

func TestCreateRefuses(t *testing.T) {
	tests := []struct {
		name   string
		change func(p *CreateParams)
	}{
		{"bad id", func(p *CreateParams) { p.ID = "ct_A1B2C3D4E5F6" }},
		{"id without prefix", func(p *CreateParams) { p.ID = "a1b2c3d4e5f6" }},
		{"empty title", func(p *CreateParams) { p.Title = "" }},
		{"long title", func(p *CreateParams) { p.Title = strings.Repeat("t", MaxTitleLen+1) }},
		{"title invalid UTF-8", func(p *CreateParams) { p.Title = "a\xffb" }},
		{"inputs array", func(p *CreateParams) { p.Inputs = json.RawMessage(`[1]`) }},
		{"inputs null", func(p *CreateParams) { p.Inputs = json.RawMessage(`null`) }},
		{"inputs not JSON", func(p *CreateParams) { p.Inputs = json.RawMessage(`{"a":}`) }},
		{"inputs duplicate member", func(p *CreateParams) { p.Inputs = json.RawMessage(`{"a":1,"a":2}`) }},
		{"inputs 1e400", func(p *CreateParams) { p.Inputs = json.RawMessage(`{"a":1e400}`) }},
		{"inputs 2^53", func(p *CreateParams) { p.Inputs = json.RawMessage(`{"a":9007199254740992}`) }},
		{"inputs -2^53", func(p *CreateParams) { p.Inputs = json.RawMessage(`{"a":-9007199254740992}`) }},
		{"inputs lone surrogate", func(p *CreateParams) { p.Inputs = json.RawMessage(`{"a":"\ud800"}`) }},
		{"inputs too deep", func(p *CreateParams) {
			p.Inputs = json.RawMessage(`{"a":` + strings.Repeat("[", MaxValueDepth) + strings.Repeat("]", MaxValueDepth) + `}`)
		}},
		{"no output schema", func(p *CreateParams) { p.OutputSchema = nil }},
		{"output schema not a schema", func(p *CreateParams) { p.OutputSchema = json.RawMessage(`{"type":"nonsense"}`) }},
		{"output schema bad pattern", func(p *CreateParams) { p.OutputSchema = json.RawMessage(`{"pattern":"("}`) }},
		{"output schema boolean", func(p *CreateParams) { p.OutputSchema = json.RawMessage(`true`) }},
		{"no verification", func(p *CreateParams) { p.Verification = nil }},
		{"verification array", func(p *CreateParams) { p.Verification = json.RawMessage(`[]`) }},
		{"verification unknown method", func(p *CreateParams) { p.Verification = json.RawMessage(`{"method":"trust_me"}`) }},
		{"negative budget", func(p *CreateParams) { p.MaxBudgetMicrocents = -1 }},
		{"budget over 2^53-1", func(p *CreateParams) { p.MaxBudgetMicrocents = 1 << 53 }},
		{"negative depth", func(p *CreateParams) { p.MaxChainDepth = -1 }},
		{"deadline at creation", func(p *CreateParams) { p.Deadline = t0 }},
		{"deadline in the past", func(p *CreateParams) { p.Deadline = t0.Add(-time.Hour) }},
		{"deadline year 10000", func(p *CreateParams) { p.Deadline = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"requirement without action", func(p *CreateParams) { p.RequiredCapabilities = []string{"docs:"} }},
		{"requirement without namespace", func(p *CreateParams) { p.RequiredCapabilities = []string{":read"} }},
		{"requirement without colon", func(p *CreateParams) { p.RequiredCapabilities = []string{"docs"} }},
		{"requirement too long", func(p *CreateParams) { p.RequiredCapabilities = []string{strings.Repeat("n", 257) + ":read"} }},
		{"requirement twice", func(p *CreateParams) { p.RequiredCapabilities = []string{"docs:read", "web:search", "docs:read"} }},
		{"too many requirements", func(p *CreateParams) {
			p.RequiredCapabilities = nil
			for i := range MaxRequiredCapabilities + 1 {
				p.RequiredCapabilities = append(p.RequiredCapabilities, "ns:a"+strings.Repeat("x", i))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testParams()
			tt.change(&p)
			if _, err := Create(rootKey, p, t0); err == nil {
				t.Error("want an error")
			}
		})
	}
	if _, err := Create(nil, testParams(), t0); err == nil {
		t.Error("nil key: want an error")
	}
}

// The limits themselves are accepted.
func TestCreateAtLimits(t *testing.T) {
	p := testParams()
	p.Inputs = json.RawMessage(`{"max":9007199254740991,"min":-9007199254740991,"deep":` +
		strings.Repeat("[", MaxValueDepth-1) + strings.Repeat("]", MaxValueDepth-1) + `}`)
	p.MaxBudgetMicrocents = 1<<53 - 1
	p.Title = strings.Repeat("t", MaxTitleLen)
	p.RequiredCapabilities = []string{"acme:billing:charge", "*:*"}
	c, err := Create(rootKey, p, t0)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(mustMarshal(t, c))
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestNewID(t *testing.T) {
	id, err := NewID(bytes.NewReader([]byte{0, 1, 2, 0xfe, 0xff, 0x10}))
	if err != nil || id != "ct_000102feff10" {
		t.Errorf("NewID = %q, %v", id, err)
	}
	if !ValidID(id) {
		t.Errorf("ValidID(%q) = false", id)
	}
	a, _ := NewID(nil)
	b, _ := NewID(nil)
	if !ValidID(a) || a == b {
		t.Errorf("random IDs %q, %q", a, b)
	}
	if _, err := NewID(iotest.ErrReader(errors.New("no entropy"))); err == nil {
		t.Error("failing reader: want an error")
	}
	if _, err := NewID(bytes.NewReader([]byte{1, 2, 3})); err == nil {
		t.Error("short reader: want an error")
	}
	for _, bad := range []string{"", "ct_", "ct_a1b2c3d4e5f", "ct_a1b2c3d4e5f6a", "CT_a1b2c3d4e5f6", "ct_a1b2c3d4e5fg", "ct_A1B2C3D4E5F6", "del_a1b2c3d4e5f6", "ct_a1b2c3d4e5f\x00"} {
		if ValidID(bad) {
			t.Errorf("ValidID(%q) = true", bad)
		}
	}
}

func TestCheckDeadline(t *testing.T) {
	c := testContract(t)
	if err := c.CheckDeadline(t0.Add(24 * time.Hour)); err != nil {
		t.Errorf("at the deadline: %v", err)
	}
	if err := c.CheckDeadline(t0.Add(24*time.Hour + time.Millisecond)); !errors.Is(err, ErrDeadlinePassed) {
		t.Errorf("after the deadline: %v, want ErrDeadlinePassed", err)
	}
	c.Constraints.Deadline = "tomorrow"
	if err := c.CheckDeadline(t0); !errors.Is(err, ErrMalformed) {
		t.Errorf("unparsable deadline: %v, want ErrMalformed", err)
	}
}
