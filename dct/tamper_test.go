package dct

import (
	"reflect"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/b64"
)

// tamperCase changes one field of the standard two-attenuation token. The
// result is re-serialized canonically, so it parses, and only the
// signatures (or the chain) can refuse it.
type tamperCase struct {
	field  string // the JSON path of the field it changes, for the coverage check
	name   string
	mutate func(st *SignedToken)
	want   *Denial // default ErrInvalidSignature
}

func tamperCases() []tamperCase {
	var cs []tamperCase
	add := func(field, name string, want *Denial, m func(*SignedToken)) {
		cs = append(cs, tamperCase{field: field, name: name, mutate: m, want: want})
	}
	auth := func(field, name string, m func(*Authority)) {
		add("authority."+field, name, nil, func(st *SignedToken) { m(&st.Authority) })
	}
	auth("issuer", "another trusted root", func(a *Authority) { a.Issuer = evilKey.ID() })
	auth("issuer", "an untrusted key", func(a *Authority) { a.Issuer = aliceKey.ID() })
	auth("delegatee", "another principal", func(a *Authority) { a.Delegatee = daveKey.ID() })
	auth("capabilities", "one removed", func(a *Authority) { a.Capabilities = a.Capabilities[:1] })
	auth("capabilities", "one added", func(a *Authority) { a.Capabilities = append(a.Capabilities, Capability{"web", "search", "*"}) })
	auth("capabilities", "emptied", func(a *Authority) { a.Capabilities = []Capability{} })
	auth("capabilities", "reordered", func(a *Authority) { a.Capabilities[0], a.Capabilities[1] = a.Capabilities[1], a.Capabilities[0] })
	auth("capabilities.namespace", "changed", func(a *Authority) { a.Capabilities[0].Namespace = "*" })
	auth("capabilities.action", "changed", func(a *Authority) { a.Capabilities[1].Action = "read" })
	auth("capabilities.resource", "widened", func(a *Authority) { a.Capabilities[1].Resource = "/project/drafts/**" })
	auth("capabilities.resource", "narrowed", func(a *Authority) { a.Capabilities[0].Resource = "/project/sub/**" })
	auth("contractId", "changed", func(a *Authority) { a.ContractID = "ct_000000000009" })
	auth("delegationId", "changed", func(a *Authority) { a.DelegationID = "del_000000000009" })
	auth("parentDelegationId", "changed", func(a *Authority) { a.ParentDelegationID = "del_000000000009" })
	auth("chainDepth", "0 to 1", func(a *Authority) { a.ChainDepth = 1 })
	auth("maxChainDepth", "raised", func(a *Authority) { a.MaxChainDepth = 4 })
	auth("maxChainDepth", "lowered", func(a *Authority) { a.MaxChainDepth = 2 })
	auth("maxBudgetMicrocents", "raised", func(a *Authority) { a.MaxBudgetMicrocents = 1001 })
	auth("maxBudgetMicrocents", "to 0", func(a *Authority) { a.MaxBudgetMicrocents = 0 })
	auth("expiresAt", "later", func(a *Authority) { a.ExpiresAt = "2026-01-02T01:00:00.000Z" })
	auth("expiresAt", "same instant written differently", func(a *Authority) { a.ExpiresAt = "2026-01-01T01:00:00Z" })
	auth("issuedAt", "earlier", func(a *Authority) { a.IssuedAt = "2025-12-31T00:00:00.000Z" })
	auth("issuedAt", "same instant written differently", func(a *Authority) { a.IssuedAt = "2026-01-01T02:00:00+02:00" })

	for i := range 2 {
		p := "attenuations[" + string(rune('0'+i)) + "]."
		at := func(field, name string, m func(*Attenuation)) {
			add(p+field, name, nil, func(st *SignedToken) { m(&st.Attenuations[i]) })
		}
		at("attenuator", "another principal", func(a *Attenuation) { a.Attenuator = daveKey.ID() })
		at("attenuator", "the issuer", func(a *Attenuation) { a.Attenuator = rootKey.ID() })
		at("delegatee", "another principal", func(a *Attenuation) { a.Delegatee = daveKey.ID() })
		at("delegationId", "changed", func(a *Attenuation) { a.DelegationID = "del_000000000009" })
		at("contractId", "changed", func(a *Attenuation) { a.ContractID = "ct_000000000009" })
	}
	// The first attenuation sets every optional field: change, unset, zero.
	a0 := func(field, name string, m func(*Attenuation)) {
		add("attenuations[0]."+field, name, nil, func(st *SignedToken) { m(&st.Attenuations[0]) })
	}
	a0("allowedCapabilities", "unset", func(a *Attenuation) { a.AllowedCapabilities = nil })
	a0("allowedCapabilities", "emptied", func(a *Attenuation) { a.AllowedCapabilities = &[]Capability{} })
	a0("allowedCapabilities", "one added", func(a *Attenuation) {
		caps := append(*a.AllowedCapabilities, Capability{"docs", "write", "/project/drafts/x"})
		a.AllowedCapabilities = &caps
	})
	a0("allowedCapabilities.namespace", "changed", func(a *Attenuation) { (*a.AllowedCapabilities)[0].Namespace = "web" })
	a0("allowedCapabilities.action", "changed", func(a *Attenuation) { (*a.AllowedCapabilities)[0].Action = "write" })
	a0("allowedCapabilities.resource", "widened", func(a *Attenuation) { (*a.AllowedCapabilities)[0].Resource = "/project/**" })
	a0("allowedCapabilities.resource", "narrowed", func(a *Attenuation) { (*a.AllowedCapabilities)[0].Resource = "/project/sub/x" })
	a0("maxBudgetMicrocents", "raised", func(a *Attenuation) { a.MaxBudgetMicrocents = ptr[int64](1000) })
	a0("maxBudgetMicrocents", "lowered", func(a *Attenuation) { a.MaxBudgetMicrocents = ptr[int64](499) })
	a0("maxBudgetMicrocents", "set to 0", func(a *Attenuation) { a.MaxBudgetMicrocents = ptr[int64](0) })
	a0("maxBudgetMicrocents", "unset", func(a *Attenuation) { a.MaxBudgetMicrocents = nil })
	a0("expiresAt", "later", func(a *Attenuation) { a.ExpiresAt = ptr("2026-01-01T00:45:00.000Z") })
	a0("expiresAt", "same instant written differently", func(a *Attenuation) { a.ExpiresAt = ptr("2026-01-01T00:30:00Z") })
	a0("expiresAt", "unset", func(a *Attenuation) { a.ExpiresAt = nil })
	a0("maxChainDepth", "raised", func(a *Attenuation) { a.MaxChainDepth = ptr[int64](2) })
	a0("maxChainDepth", "set to 0", func(a *Attenuation) { a.MaxChainDepth = ptr[int64](0) })
	a0("maxChainDepth", "unset", func(a *Attenuation) { a.MaxChainDepth = nil })
	// The second sets none: adding one, even one that changes nothing the
	// chain grants, must break its signature.
	a1 := func(field, name string, m func(*Attenuation)) {
		add("attenuations[1]."+field, name, nil, func(st *SignedToken) { m(&st.Attenuations[1]) })
	}
	a1("allowedCapabilities", "set to the inherited value", func(a *Attenuation) {
		a.AllowedCapabilities = &[]Capability{{"docs", "read", "/project/sub/**"}}
	})
	a1("allowedCapabilities", "set empty", func(a *Attenuation) { a.AllowedCapabilities = &[]Capability{} })
	a1("maxBudgetMicrocents", "set to the inherited value", func(a *Attenuation) { a.MaxBudgetMicrocents = ptr[int64](500) })
	a1("maxBudgetMicrocents", "set to 0", func(a *Attenuation) { a.MaxBudgetMicrocents = ptr[int64](0) })
	a1("expiresAt", "set to the inherited value", func(a *Attenuation) { a.ExpiresAt = ptr("2026-01-01T00:30:00.000Z") })
	a1("maxChainDepth", "set to 0, what it leaves anyway", func(a *Attenuation) { a.MaxChainDepth = ptr[int64](0) })

	for i := range 3 {
		p := "signatures[" + string(rune('0'+i)) + "]."
		sg := func(field, name string, want *Denial, m func(*Signature, *SignedToken)) {
			add(p+field, name, want, func(st *SignedToken) { m(&st.Signatures[i], st) })
		}
		sg("signer", "another trusted root", nil, func(s *Signature, _ *SignedToken) { s.Signer = evilKey.ID() })
		sg("signer", "another principal", nil, func(s *Signature, _ *SignedToken) { s.Signer = daveKey.ID() })
		sg("signature", "one bit flipped", nil, func(s *Signature, _ *SignedToken) { s.Signature = flipBit(s.Signature, 100) })
		sg("signature", "last bit flipped", nil, func(s *Signature, _ *SignedToken) { s.Signature = flipBit(s.Signature, 511) })
		sg("signature", "another block's", nil, func(s *Signature, st *SignedToken) {
			s.Signature = st.Signatures[(i+1)%3].Signature
		})
		sg("signature", "truncated", ErrMalformed, func(s *Signature, _ *SignedToken) { s.Signature = s.Signature[:84] })
		sg("covers", "next block", nil, func(s *Signature, _ *SignedToken) { s.Covers = Covers(i) })
		sg("covers", "the authority", nil, func(s *Signature, _ *SignedToken) {
			if s.Covers == AuthorityBlock {
				s.Covers = 1
			} else {
				s.Covers = AuthorityBlock
			}
		})
	}

	add("format", "another format", ErrMalformed, func(st *SignedToken) { st.Format = "delegateos-sjt-v2" })
	add("attenuations", "last dropped, signature kept", nil, func(st *SignedToken) { st.Attenuations = st.Attenuations[:1] })
	add("attenuations", "first dropped with its signature", nil, func(st *SignedToken) {
		st.Attenuations = st.Attenuations[1:]
		st.Signatures = append(st.Signatures[:1], st.Signatures[2])
	})
	add("attenuations", "swapped", nil, func(st *SignedToken) {
		st.Attenuations[0], st.Attenuations[1] = st.Attenuations[1], st.Attenuations[0]
	})
	add("attenuations", "last duplicated", nil, func(st *SignedToken) {
		st.Attenuations = append(st.Attenuations, st.Attenuations[1])
	})
	add("signatures", "last dropped", nil, func(st *SignedToken) { st.Signatures = st.Signatures[:2] })
	add("signatures", "last duplicated", nil, func(st *SignedToken) { st.Signatures = append(st.Signatures, st.Signatures[2]) })
	add("signatures", "reversed", nil, func(st *SignedToken) {
		st.Signatures[0], st.Signatures[2] = st.Signatures[2], st.Signatures[0]
	})
	add("authority", "replaced by another root's", nil, func(st *SignedToken) {
		other := chain2ByEvil()
		st.Authority = other.Authority
	})
	return cs
}

// chain2ByEvil is the standard authority issued by the second trusted root.
func chain2ByEvil() SignedToken {
	st := SignedToken{Format: Format, Authority: baseAuthority(), Attenuations: []Attenuation{}}
	st.Authority.Issuer = evilKey.ID()
	return st
}

// flipBit flips one bit of a base64url value's decoded bytes.
func flipBit(s string, bit int) string {
	b, err := b64.Decode(s)
	if err != nil {
		panic(err)
	}
	b[bit/8] ^= 1 << (bit % 8)
	return b64.Encode(b)
}

func TestTamperEachField(t *testing.T) {
	tok := chain2(t)
	orig := tok.Unverified()
	// Both roots are trusted, so changing the issuer is refused by the
	// signatures and not merely by the list of roots.
	v := mustVerifier(t, Options{Roots: []string{rootKey.ID(), evilKey.ID()}})
	if _, err := v.Verify(tok.String(), readReq()); err != nil {
		t.Fatalf("untampered token: %v", err)
	}
	if s := serialize(t, deepCopy(t, orig)); s != tok.String() {
		t.Fatal("re-serializing the untampered token changes it")
	}
	for _, c := range tamperCases() {
		t.Run(c.field+"/"+c.name, func(t *testing.T) {
			st := deepCopy(t, orig)
			c.mutate(&st)
			s := serialize(t, st)
			if s == tok.String() {
				t.Fatal("the mutation changed nothing")
			}
			want := c.want
			if want == nil {
				want = ErrInvalidSignature
				if _, err := Parse(s); err != nil {
					t.Fatalf("tampered token does not parse, so this tests the parser, not the signatures: %v", err)
				}
			}
			// Every request the token could grant is refused.
			for _, req := range []Request{readReq(), {Namespace: "docs", Action: "read", Resource: "/project/sub/x", Now: t0}} {
				scope, err := v.Verify(s, req)
				wantDenial(t, err, want)
				if scope != nil {
					t.Fatal("scope with a denial")
				}
			}
		})
	}
	if _, err := v.Verify(tok.String(), readReq()); err != nil {
		t.Fatalf("untampered token after the tampering: %v", err)
	}
}

// TestTamperCoverage holds the tamper table to every field of every type
// in the token, so a field added later cannot go untested.
func TestTamperCoverage(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range tamperCases() {
		covered[c.field] = true
	}
	var want []string
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct {
			return
		}
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case prefix == "" && name == "attenuations":
				want = append(want, name)
				walk("attenuations[0].", f.Type)
				walk("attenuations[1].", f.Type)
			case prefix == "" && name == "signatures":
				want = append(want, name)
				for _, p := range []string{"signatures[0].", "signatures[1].", "signatures[2]."} {
					walk(p, f.Type)
				}
			default:
				want = append(want, prefix+name)
				walk(prefix+name+".", f.Type)
			}
		}
	}
	walk("", reflect.TypeFor[SignedToken]())
	for _, f := range want {
		// Attenuation 1 sets no capabilities to change; attenuation 0's
		// capability fields stand for the Capability type there.
		if strings.HasPrefix(f, "attenuations[1].allowedCapabilities.") {
			continue
		}
		if !covered[f] {
			t.Errorf("no tamper case for %s", f)
		}
	}
	if len(want) < 40 {
		t.Errorf("found only %d fields: %v", len(want), want)
	}
}

// Dropping the last attenuation and its signature gives back the parent
// token exactly: a delegate can always present what it was given.
func TestTruncationIsTheParent(t *testing.T) {
	tok := chain2(t)
	st := tok.Unverified()
	st.Attenuations = st.Attenuations[:1]
	st.Signatures = st.Signatures[:2]
	s := serialize(t, st)
	parent := mustCreate(t, rootParams())
	parent = mustAttenuate(t, parent, AttenuateParams{
		Attenuator: aliceKey, Delegatee: bobKey.ID(), DelegationID: "del_000000000002", ContractID: "ct_000000000002",
		Capabilities:        &[]Capability{{Namespace: "docs", Action: "read", Resource: "/project/sub/**"}},
		MaxBudgetMicrocents: ptr[int64](500), ExpiresAt: ptr(t0.Add(1800e9)), MaxChainDepth: ptr[int64](1),
	})
	if s != parent.String() {
		t.Fatal("truncated token is not the parent")
	}
}
