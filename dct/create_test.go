package dct

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/canon"
)

func TestCreate(t *testing.T) {
	p := rootParams()
	p.Delegatee = aliceKey.DID()
	p.ExpiresAt = t0.Add(time.Hour + 123456789*time.Nanosecond)
	p.IssuedAt = t0.Add(999999 * time.Nanosecond).In(time.FixedZone("X", 3600))
	tok := mustCreate(t, p)
	want := SignedToken{
		Format: Format,
		Authority: Authority{
			Issuer: rootKey.ID(), Delegatee: aliceKey.ID(), Capabilities: projectCaps,
			ContractID: "ct_000000000001", DelegationID: "del_000000000001", ParentDelegationID: RootParentDelegationID,
			ChainDepth: 0, MaxChainDepth: 3, MaxBudgetMicrocents: 1000,
			ExpiresAt: "2026-01-01T01:00:00.123Z", IssuedAt: "2026-01-01T00:00:00.000Z",
		},
		Attenuations: []Attenuation{},
	}
	got := tok.Unverified()
	got.Signatures = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("token\n got %+v\nwant %+v", got, want)
	}
	if tok.Blocks() != 1 || tok.Delegatee() != aliceKey.ID() || !reflect.DeepEqual(tok.Signers(), []string{rootKey.ID()}) {
		t.Errorf("blocks %d, delegatee %s, signers %v", tok.Blocks(), tok.Delegatee(), tok.Signers())
	}

	t.Run("defaults", func(t *testing.T) {
		p := rootParams()
		p.IssuedAt = time.Time{}
		p.ExpiresAt = time.Now().Add(time.Hour)
		p.ParentDelegationID = ""
		before := time.Now().Add(-time.Millisecond)
		a := mustCreate(t, p).Unverified().Authority
		issued, err := time.Parse(time.RFC3339, a.IssuedAt)
		if err != nil || issued.Before(before) || issued.After(time.Now()) {
			t.Errorf("issuedAt %s is not now", a.IssuedAt)
		}
		if a.ParentDelegationID != RootParentDelegationID {
			t.Errorf("parentDelegationId %q", a.ParentDelegationID)
		}
	})

	t.Run("copies its input", func(t *testing.T) {
		p := rootParams()
		p.Capabilities = append([]Capability{}, projectCaps...)
		tok := mustCreate(t, p)
		p.Capabilities[0].Resource = "*"
		if got := tok.Unverified().Authority.Capabilities[0].Resource; got != "/project/**" {
			t.Errorf("token changed with the caller's slice: %s", got)
		}
		if _, err := mustVerifier(t, Options{}).VerifyToken(tok, readReq()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCreateRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*CreateParams)
	}{
		{"no issuer", func(p *CreateParams) { p.Issuer = nil }},
		{"invalid delegatee", func(p *CreateParams) { p.Delegatee = "alice" }},
		{"no delegatee", func(p *CreateParams) { p.Delegatee = "" }},
		{"no contract", func(p *CreateParams) { p.ContractID = "" }},
		{"no delegation", func(p *CreateParams) { p.DelegationID = "" }},
		{"contract too long", func(p *CreateParams) { p.ContractID = strings.Repeat("c", MaxStringLen+1) }},
		{"negative chain depth", func(p *CreateParams) { p.ChainDepth = -1 }},
		{"negative max chain depth", func(p *CreateParams) { p.MaxChainDepth = -1 }},
		{"negative budget", func(p *CreateParams) { p.MaxBudgetMicrocents = -1 }},
		{"budget beyond 2^53-1", func(p *CreateParams) { p.MaxBudgetMicrocents = canon.MaxSafeInteger + 1 }},
		{"chain depth above max", func(p *CreateParams) { p.ChainDepth = 4 }},
		{"no expiry", func(p *CreateParams) { p.ExpiresAt = time.Time{} }},
		{"expiry at issue", func(p *CreateParams) { p.ExpiresAt = p.IssuedAt }},
		{"expiry within the issue millisecond", func(p *CreateParams) { p.ExpiresAt = p.IssuedAt.Add(time.Microsecond) }},
		{"expiry before issue", func(p *CreateParams) { p.ExpiresAt = p.IssuedAt.Add(-time.Hour) }},
		{"capability without resource", func(p *CreateParams) { p.Capabilities = []Capability{{"docs", "read", ""}} }},
		{"capability without action", func(p *CreateParams) { p.Capabilities = []Capability{{"docs", "", "/a"}} }},
		{"capability without namespace", func(p *CreateParams) { p.Capabilities = []Capability{{"", "read", "/a"}} }},
		{"star inside a segment", func(p *CreateParams) { p.Capabilities = []Capability{{"docs", "read", "/project/*.go"}} }},
		{"double star inside a segment", func(p *CreateParams) { p.Capabilities = []Capability{{"docs", "read", "/project/a**"}} }},
		{"too many capabilities", func(p *CreateParams) { p.Capabilities = repeatCaps(MaxCapabilities+1, projectCaps[0]) }},
		{"resource too long", func(p *CreateParams) {
			p.Capabilities = []Capability{{"docs", "read", "/" + strings.Repeat("r", MaxResourceLen)}}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := rootParams()
			c.edit(&p)
			if tok, err := Create(p); err == nil {
				t.Fatalf("created %s", tok)
			}
		})
	}
}

// attenuationCase is one way to widen a token, tried through Attenuate
// (which must refuse) and by hand (which Verify must deny).
type attenuationCase struct {
	name string
	// parent is the authority to attenuate; nil is baseAuthority.
	parent func(*Authority)
	// prior attenuations before the one under test, signed by hand.
	prior []Attenuation
	p     AttenuateParams // Attenuator and Delegatee default to alice → bob
	// byHand is the attenuation Attenuate would have made, and its signer.
	byHand Attenuation
	signer *identity.Keypair
	now    time.Time // of both the attenuation and the verification; zero is t0
	want   *Denial
}

func TestAttenuateRefusesWhatVerifyDenies(t *testing.T) {
	cases := []attenuationCase{
		{name: "capability expansion",
			p:      AttenuateParams{Capabilities: &[]Capability{{"docs", "read", "/**"}}},
			byHand: withCaps(a0, Capability{"docs", "read", "/**"}), want: ErrAttenuationViolation},
		{name: "action expansion",
			p:      AttenuateParams{Capabilities: &[]Capability{{"docs", "delete", "/project/a"}}},
			byHand: withCaps(a0, Capability{"docs", "delete", "/project/a"}), want: ErrAttenuationViolation},
		{name: "capability expansion after narrowing",
			prior:  []Attenuation{withCaps(att(aliceKey, aliceKey, "del_0"), Capability{"docs", "read", "/project/a/*"})},
			p:      AttenuateParams{Capabilities: &[]Capability{{"docs", "read", "/project/b"}}},
			byHand: withCaps(a0, Capability{"docs", "read", "/project/b"}), want: ErrAttenuationViolation},
		{name: "budget expansion",
			p:      AttenuateParams{MaxBudgetMicrocents: ptr[int64](1001)},
			byHand: withBudget(a0, 1001), want: ErrAttenuationViolation},
		{name: "budget expansion after narrowing",
			prior:  []Attenuation{withBudget(att(aliceKey, aliceKey, "del_0"), 10)},
			p:      AttenuateParams{MaxBudgetMicrocents: ptr[int64](11)},
			byHand: withBudget(a0, 11), want: ErrAttenuationViolation},
		{name: "expiry expansion",
			p:      AttenuateParams{ExpiresAt: ptr(t0.Add(time.Hour + time.Millisecond))},
			byHand: withExpiry(a0, "2026-01-01T01:00:00.001Z"), want: ErrAttenuationViolation},
		{name: "depth expansion",
			p:      AttenuateParams{MaxChainDepth: ptr[int64](3)},
			byHand: withDepth(a0, 3), want: ErrAttenuationViolation},
		{name: "depth expansion after narrowing",
			prior:  []Attenuation{withDepth(att(aliceKey, aliceKey, "del_0"), 1)},
			p:      AttenuateParams{MaxChainDepth: ptr[int64](1)},
			byHand: withDepth(a0, 1), want: ErrAttenuationViolation},
		{name: "no delegation left at the authority",
			parent: func(a *Authority) { a.MaxChainDepth = 0 },
			byHand: a0, want: ErrAttenuationViolation},
		{name: "no delegation left after an attenuation",
			prior:  []Attenuation{withDepth(att(aliceKey, aliceKey, "del_0"), 0)},
			byHand: a0, want: ErrAttenuationViolation},
		{name: "attenuator key is not the delegatee",
			p:      AttenuateParams{Attenuator: bobKey, Delegatee: carolKey.ID()},
			byHand: att(bobKey, carolKey, "del_000000000002"), signer: bobKey, want: ErrAttenuationViolation},
		{name: "attenuator key is the issuer",
			p:      AttenuateParams{Attenuator: rootKey, Delegatee: carolKey.ID()},
			byHand: att(rootKey, carolKey, "del_000000000002"), signer: rootKey, want: ErrAttenuationViolation},
		{name: "already expired",
			p:      AttenuateParams{ExpiresAt: ptr(t0.Add(5 * time.Minute))},
			byHand: withExpiry(a0, "2026-01-01T00:05:00.000Z"), now: t0.Add(10 * time.Minute), want: ErrExpired},
		{name: "parent already expired",
			byHand: a0, now: t0.Add(2 * time.Hour), want: ErrExpired},
		{name: "negative budget",
			p:      AttenuateParams{MaxBudgetMicrocents: ptr[int64](-1)},
			byHand: withBudget(a0, -1), want: ErrMalformed},
		{name: "negative depth",
			p:      AttenuateParams{MaxChainDepth: ptr[int64](-1)},
			byHand: withDepth(a0, -1), want: ErrMalformed},
		{name: "over the attenuation limit",
			parent: func(a *Authority) { a.MaxChainDepth = MaxAttenuations + 1 },
			prior:  selfAttenuations(MaxAttenuations),
			byHand: a0, want: ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now := c.now
			if now.IsZero() {
				now = t0.Add(time.Minute)
			}
			a := baseAuthority()
			if c.parent != nil {
				c.parent(&a)
			}
			keys := []*identity.Keypair{rootKey}
			for range c.prior {
				keys = append(keys, aliceKey)
			}
			parent, err := Parse(handToken(t, a, append([]Attenuation{}, c.prior...), keys...))
			if err != nil {
				t.Fatal(err)
			}
			v := mustVerifier(t, Options{})
			req := readReq()
			req.Now = now
			req.Resource = "/project/a/x"
			if _, err := v.VerifyToken(parent, req); err != nil && c.name != "parent already expired" {
				t.Fatalf("the parent itself is denied: %v", err)
			}

			p := c.p
			if p.Attenuator == nil {
				p.Attenuator = aliceKey
			}
			if p.Delegatee == "" {
				p.Delegatee = bobKey.ID()
			}
			p.DelegationID = "del_000000000002"
			p.Now = now
			if tok, err := Attenuate(parent, p); err == nil {
				t.Fatalf("Attenuate made %s", tok)
			}

			signer := c.signer
			if signer == nil {
				signer = aliceKey
			}
			s := handToken(t, a, append(append([]Attenuation{}, c.prior...), c.byHand), append(keys, signer)...)
			_, err = v.Verify(s, req)
			wantDenial(t, err, c.want)
		})
	}
}

// selfAttenuations are n attenuations by alice to herself.
func selfAttenuations(n int) []Attenuation {
	var atts []Attenuation
	for i := range n {
		atts = append(atts, att(aliceKey, aliceKey, "del_"+strconv.Itoa(i)))
	}
	return atts
}

// The refusals above are also the boundaries: one step back, Attenuate
// makes a token that Verify accepts.
func TestAttenuateAtTheLimits(t *testing.T) {
	root := mustCreate(t, rootParams())
	for _, c := range []struct {
		name string
		p    AttenuateParams
		now  time.Time
		want *Denial // for a request the root token grants
	}{
		{"same capabilities", AttenuateParams{Capabilities: &[]Capability{projectCaps[1], projectCaps[0]}}, t0, nil},
		{"no capabilities", AttenuateParams{Capabilities: &[]Capability{}}, t0, ErrCapabilityNotGranted},
		{"same budget", AttenuateParams{MaxBudgetMicrocents: ptr[int64](1000)}, t0, nil},
		{"zero budget", AttenuateParams{MaxBudgetMicrocents: ptr[int64](0)}, t0, ErrBudgetExceeded},
		{"same expiry", AttenuateParams{ExpiresAt: ptr(t0.Add(time.Hour))}, t0, nil},
		{"expiry a millisecond from now", AttenuateParams{ExpiresAt: ptr(t0.Add(time.Millisecond))}, t0, nil},
		{"parent expiring now", AttenuateParams{}, t0.Add(time.Hour), nil},
		{"depth one below", AttenuateParams{MaxChainDepth: ptr[int64](2)}, t0, nil},
		{"depth zero", AttenuateParams{MaxChainDepth: ptr[int64](0)}, t0, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := c.p
			p.Attenuator, p.Delegatee, p.DelegationID, p.Now = aliceKey, bobKey.ID(), "del_2", c.now
			tok, err := Attenuate(root, p)
			if err != nil {
				t.Fatal(err)
			}
			req := Request{Namespace: "docs", Action: "write", Resource: "/project/drafts/x", Now: c.now}
			_, err = mustVerifier(t, Options{}).VerifyToken(tok, req)
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantDenial(t, err, c.want)
		})
	}
}

func TestAttenuateRefuses(t *testing.T) {
	root := mustCreate(t, rootParams())
	tampered := func() *Token {
		st := root.Unverified()
		st.Authority.MaxBudgetMicrocents = 1 << 40
		tok, err := Parse(serialize(t, st))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}()
	badChain, err := Parse(handToken(t, baseAuthority(), []Attenuation{att(bobKey, carolKey, "del_2")}, rootKey, bobKey))
	if err != nil {
		t.Fatal(err)
	}
	// Broken at its last block, made by alice: only the chain walk can
	// tell alice that she is not the holder of a valid token.
	expanded, err := Parse(handToken(t, baseAuthority(), []Attenuation{withCaps(a0, Capability{"docs", "read", "/**"})}, rootKey, aliceKey))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		parent *Token
		edit   func(*AttenuateParams)
	}{
		{"no attenuator", root, func(p *AttenuateParams) { p.Attenuator = nil }},
		{"invalid delegatee", root, func(p *AttenuateParams) { p.Delegatee = "bob" }},
		{"no delegation ID", root, func(p *AttenuateParams) { p.DelegationID = "" }},
		{"delegation ID too long", root, func(p *AttenuateParams) { p.DelegationID = strings.Repeat("d", MaxStringLen+1) }},
		{"contract ID too long", root, func(p *AttenuateParams) { p.ContractID = strings.Repeat("c", MaxStringLen+1) }},
		{"capability without resource", root, func(p *AttenuateParams) { p.Capabilities = &[]Capability{{"docs", "read", ""}} }},
		{"star inside a segment", root, func(p *AttenuateParams) { p.Capabilities = &[]Capability{{"docs", "read", "/project/a*"}} }},
		{"too many capabilities", root, func(p *AttenuateParams) {
			c := repeatCaps(MaxCapabilities+1, Capability{"docs", "read", "/project/a"})
			p.Capabilities = &c
		}},
		{"expiry now", root, func(p *AttenuateParams) { p.ExpiresAt = ptr(p.Now) }},
		{"expiry within the current millisecond", root, func(p *AttenuateParams) { p.ExpiresAt = ptr(p.Now.Add(time.Microsecond)) }},
		{"parent signature broken", tampered, func(*AttenuateParams) {}},
		{"parent chain broken", badChain, func(p *AttenuateParams) { p.Attenuator = carolKey }},
		{"parent chain expands", expanded, func(*AttenuateParams) {}},
		{"parent chain expands, attenuated by its holder", expanded, func(p *AttenuateParams) { p.Attenuator = bobKey }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := AttenuateParams{Attenuator: aliceKey, Delegatee: bobKey.ID(), DelegationID: "del_2", Now: t0}
			c.edit(&p)
			if tok, err := Attenuate(c.parent, p); err == nil {
				t.Fatalf("Attenuate made %s", tok)
			}
		})
	}
}

func TestAttenuate(t *testing.T) {
	root := mustCreate(t, rootParams())
	rootStr := root.String()
	caps := []Capability{{"docs", "read", "/project/a/**"}}
	tok := mustAttenuate(t, root, AttenuateParams{
		Attenuator: aliceKey, Delegatee: bobKey.DID(), DelegationID: "del_2",
		Capabilities: &caps, ExpiresAt: ptr(t0.Add(10*time.Minute + 1234567*time.Nanosecond)),
	})
	caps[0].Resource = "*"
	if root.String() != rootStr {
		t.Error("Attenuate changed its parent")
	}
	got := tok.Unverified().Attenuations[0]
	want := Attenuation{
		Attenuator: aliceKey.ID(), Delegatee: bobKey.ID(), DelegationID: "del_2", ContractID: "ct_000000000001",
		AllowedCapabilities: &[]Capability{{"docs", "read", "/project/a/**"}}, ExpiresAt: ptr("2026-01-01T00:10:00.001Z"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("attenuation\n got %+v\nwant %+v", got, want)
	}
	if tok.Delegatee() != bobKey.ID() || tok.Blocks() != 2 {
		t.Errorf("delegatee %s, %d blocks", tok.Delegatee(), tok.Blocks())
	}
	sigs := tok.Unverified().Signatures
	if len(sigs) != 2 || sigs[1].Signer != aliceKey.ID() || sigs[1].Covers != 0 {
		t.Errorf("signatures %+v", sigs)
	}
	// A root the verifier does not trust can still be attenuated: trust
	// is the verifier's decision.
	p := rootParams()
	p.Issuer = evilKey
	mustAttenuate(t, mustCreate(t, p), AttenuateParams{Attenuator: aliceKey, Delegatee: bobKey.ID(), DelegationID: "del_2"})
}

// Unverified is a deep copy: editing it cannot change what a Verifier
// reads from the token.
func TestUnverifiedIsACopy(t *testing.T) {
	tok := chain2(t)
	want, err := mustVerifier(t, Options{CacheSize: -1}).VerifyToken(tok, readReq())
	if err != nil {
		t.Fatal(err)
	}
	u := tok.Unverified()
	u.Authority.Capabilities[0] = Capability{"*", "*", "*"}
	(*u.Attenuations[0].AllowedCapabilities)[0] = Capability{"*", "*", "*"}
	*u.Attenuations[0].MaxBudgetMicrocents = 1000
	*u.Attenuations[0].MaxChainDepth = 2
	*u.Attenuations[0].ExpiresAt = "2026-01-01T01:00:00.000Z"
	u.Attenuations[1].Delegatee = daveKey.ID()
	u.Signatures[0].Signer = daveKey.ID()
	ins := tok.Inspect()
	(*ins.Blocks[0].Capabilities)[0] = Capability{"*", "*", "*"}
	(*ins.Blocks[1].Capabilities)[0] = Capability{"*", "*", "*"}
	*ins.Blocks[1].MaxBudgetMicrocents = 1000
	ins.Effective.Capabilities[0] = Capability{"*", "*", "*"}

	got, err := mustVerifier(t, Options{CacheSize: -1}).VerifyToken(tok, readReq())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("scope changed after editing copies:\n got %+v\nwant %+v", got, want)
	}
	if serialize(t, tok.Unverified()) != tok.String() {
		t.Error("Unverified no longer serializes to the token")
	}
	root := mustCreate(t, rootParams())
	if serialize(t, root.Unverified()) != root.String() {
		t.Error("Unverified of a root token does not keep its empty attenuation list")
	}
}

func TestInspect(t *testing.T) {
	tok := chain2(t)
	ins := tok.Inspect()
	if !ins.SignaturesValid || ins.SignatureProblem != "" || ins.ChainProblem != "" || ins.Effective == nil {
		t.Fatalf("inspection %+v", ins)
	}
	wantEff := Effective{
		Holder: carolKey.ID(), Capabilities: []Capability{{"docs", "read", "/project/sub/**"}}, MaxBudgetMicrocents: 500,
		ExpiresAt: "2026-01-01T00:30:00.000Z", ChainDepth: 2, MaxChainDepth: 2, ContractID: "ct_000000000002", DelegationID: "del_000000000003",
	}
	if !reflect.DeepEqual(*ins.Effective, wantEff) {
		t.Errorf("effective\n got %+v\nwant %+v", *ins.Effective, wantEff)
	}
	if len(ins.Blocks) != 3 {
		t.Fatalf("%d blocks", len(ins.Blocks))
	}
	ids := tok.RevocationIDs()
	for i, b := range ins.Blocks {
		if b.RevocationID != ids[i] || b.Signer != tok.Signers()[i] || b.Index != i {
			t.Errorf("block %d: %+v", i, b)
		}
	}
	if ins.Blocks[0].SignerDID != rootKey.DID() || ins.Blocks[2].DelegateeDID != carolKey.DID() {
		t.Errorf("DIDs %s %s", ins.Blocks[0].SignerDID, ins.Blocks[2].DelegateeDID)
	}

	st := tok.Unverified()
	st.Attenuations[1].DelegationID = "del_x"
	bad, err := Parse(serialize(t, st))
	if err != nil {
		t.Fatal(err)
	}
	if ins := bad.Inspect(); ins.SignaturesValid || ins.SignatureProblem == "" {
		t.Errorf("tampered token inspects as %+v", ins)
	}
	badChain, err := Parse(handToken(t, baseAuthority(), []Attenuation{att(bobKey, carolKey, "del_2")}, rootKey, bobKey))
	if err != nil {
		t.Fatal(err)
	}
	if ins := badChain.Inspect(); !ins.SignaturesValid || ins.Effective != nil || ins.ChainProblem == "" {
		t.Errorf("broken chain inspects as %+v", ins)
	}
}

func TestParseCapability(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Capability
		ok   bool
	}{
		{"docs:read:/project/**", Capability{"docs", "read", "/project/**"}, true},
		{"web:fetch:https://example.com/a", Capability{"web", "fetch", "https://example.com/a"}, true},
		{"*:*:*", Capability{"*", "*", "*"}, true},
		{"docs:read", Capability{}, false},
		{"docs::/a", Capability{}, false},
		{":read:/a", Capability{}, false},
		{"docs:read:", Capability{}, false},
		{"", Capability{}, false},
	} {
		got, err := ParseCapability(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseCapability(%q) = %+v, %v", c.in, got, err)
		}
		if c.ok && got.String() != c.in {
			t.Errorf("String() = %q, want %q", got.String(), c.in)
		}
	}
}

// A time whose year does not fit the four-digit timestamp form would make
// a token that no verifier can read back; Create and Attenuate refuse it.
func TestCreateRefusesUnwritableYears(t *testing.T) {
	root, _ := identity.FromSeed(bytes.Repeat([]byte{1}, 32), "")
	a, _ := identity.FromSeed(bytes.Repeat([]byte{2}, 32), "")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := CreateParams{Issuer: root, Delegatee: a.ID(), Capabilities: []Capability{{"docs", "read", "/x"}},
		ContractID: "ct_1", DelegationID: "del_1", MaxChainDepth: 1, MaxBudgetMicrocents: 1, IssuedAt: now}
	p.ExpiresAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := Create(p); err == nil {
		t.Fatal("an expiry in the year 10000 was accepted")
	}
	p.ExpiresAt = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	if _, err := Create(p); err != nil {
		t.Fatalf("the year 9999 must be accepted: %v", err)
	}
	if _, err := NewVerifier(Options{Roots: []string{root.ID()}, ClockSkew: -time.Second}); err == nil {
		t.Fatal("a negative clock skew was accepted")
	}
}
