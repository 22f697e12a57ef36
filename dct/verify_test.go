package dct

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/sig"
)

func TestVerifyScope(t *testing.T) {
	tok := chain2(t)
	v := mustVerifier(t, Options{})
	req := readReq()
	req.SpentMicrocents = 120
	got, err := v.Verify(tok.String(), req)
	if err != nil {
		t.Fatal(err)
	}
	keys := tok.DelegationKeys()
	want := &AuthorizedScope{
		Capabilities:              []Capability{{Namespace: "docs", Action: "read", Resource: "/project/sub/**"}},
		RemainingBudgetMicrocents: 380,
		ChainDepth:                2,
		MaxChainDepth:             2,
		ContractID:                "ct_000000000002",
		DelegationID:              "del_000000000003",
		Issuer:                    rootKey.ID(),
		Delegatee:                 carolKey.ID(),
		ExpiresAt:                 "2026-01-01T00:30:00.000Z",
		Chain: []ChainLink{
			{DelegationID: "del_000000000001", Key: keys[0], Delegatee: aliceKey.ID(), MaxBudgetMicrocents: 1000},
			{DelegationID: "del_000000000002", Key: keys[1], Delegatee: bobKey.ID(), MaxBudgetMicrocents: 500},
			{DelegationID: "del_000000000003", Key: keys[2], Delegatee: carolKey.ID(), MaxBudgetMicrocents: 500},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("scope:\n got %+v\nwant %+v", got, want)
	}
}

// keyOf finds the test key of a principal ID.
func keyOf(tb testing.TB, id string) *identity.Keypair {
	tb.Helper()
	for _, k := range []*identity.Keypair{rootKey, aliceKey, bobKey, carolKey, daveKey, evilKey} {
		if k.ID() == id {
			return k
		}
	}
	tb.Fatalf("no test key for %s", id)
	return nil
}

// ruleCase is a token built and signed by hand, so it can break any rule.
type ruleCase struct {
	name string
	auth func(*Authority) // changes to baseAuthority
	atts []Attenuation
	// keys sign the blocks; by default the key of the issuer and of each
	// attenuator.
	keys []*identity.Keypair
	post func(*SignedToken) // changes after signing
	opts Options
	req  func(*Request)
	want *Denial
	// check inspects an accepted scope.
	check func(*testing.T, *AuthorizedScope)
}

func (c *ruleCase) token(tb testing.TB) string {
	tb.Helper()
	a := baseAuthority()
	if c.auth != nil {
		c.auth(&a)
	}
	atts := c.atts
	if atts == nil {
		atts = []Attenuation{}
	}
	st := SignedToken{Format: Format, Authority: a, Attenuations: atts}
	keys := c.keys
	if keys == nil {
		keys = []*identity.Keypair{keyOf(tb, a.Issuer)}
		for _, at := range atts {
			keys = append(keys, keyOf(tb, at.Attenuator))
		}
	}
	sign(tb, &st, keys...)
	if c.post != nil {
		c.post(&st)
	}
	return serialize(tb, st)
}

func runRuleCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.token(t)
			v := mustVerifier(t, c.opts)
			req := readReq()
			if c.req != nil {
				c.req(&req)
			}
			scope, err := v.Verify(s, req)
			if c.want == nil {
				if err != nil {
					t.Fatalf("denied: %v", err)
				}
				if c.check != nil {
					c.check(t, scope)
				}
				return
			}
			wantDenial(t, err, c.want)
			if scope != nil {
				t.Errorf("denial came with a scope: %+v", scope)
			}
		})
	}
}

// withCaps, withBudget, withExpiry and withDepth set one optional field.
func withCaps(a Attenuation, caps ...Capability) Attenuation {
	caps = append([]Capability{}, caps...) // set and empty is not unset
	a.AllowedCapabilities = &caps
	return a
}

func withBudget(a Attenuation, b int64) Attenuation {
	a.MaxBudgetMicrocents = &b
	return a
}

func withExpiry(a Attenuation, e string) Attenuation {
	a.ExpiresAt = &e
	return a
}

func withDepth(a Attenuation, d int64) Attenuation {
	a.MaxChainDepth = &d
	return a
}

var (
	a0 = att(aliceKey, bobKey, "del_000000000002")
	a1 = att(bobKey, carolKey, "del_000000000003")
	a2 = att(carolKey, daveKey, "del_000000000004")
)

func TestVerifySignatureRules(t *testing.T) {
	signedBy := func(i int, k *identity.Keypair, v any) func(*SignedToken) {
		return func(st *SignedToken) { st.Signatures[i].Signature = signValue(t, k, v) }
	}
	runRuleCases(t, []ruleCase{
		{name: "hand-built chain is valid", atts: []Attenuation{a0, a1}},
		{name: "issuer is not a trusted root", auth: func(a *Authority) { a.Issuer = evilKey.ID() }, want: ErrInvalidSignature},
		{name: "issuer is the second trusted root", auth: func(a *Authority) { a.Issuer = evilKey.ID() },
			opts: Options{Roots: []string{rootKey.ID(), evilKey.DID()}}},
		{name: "trusted root given as did:key", opts: Options{Roots: []string{rootKey.DID()}}},
		{name: "authority signed by another key",
			keys: []*identity.Keypair{evilKey}, post: func(st *SignedToken) { st.Signatures[0].Signer = rootKey.ID() },
			want: ErrInvalidSignature},
		{name: "authority signed by another trusted root",
			keys: []*identity.Keypair{evilKey}, post: func(st *SignedToken) { st.Signatures[0].Signer = rootKey.ID() },
			opts: Options{Roots: []string{rootKey.ID(), evilKey.ID()}}, want: ErrInvalidSignature},
		{name: "signatures[0].signer is not the issuer",
			post: func(st *SignedToken) { st.Signatures[0].Signer = aliceKey.ID() }, want: ErrInvalidSignature},
		{name: "signatures[0].signer is another trusted root",
			post: func(st *SignedToken) { st.Signatures[0].Signer = evilKey.ID() },
			opts: Options{Roots: []string{rootKey.ID(), evilKey.ID()}}, want: ErrInvalidSignature},
		{name: "signatures[0] covers attenuation 0", atts: []Attenuation{a0},
			post: func(st *SignedToken) { st.Signatures[0].Covers = 0 }, want: ErrInvalidSignature},
		{name: "no signatures", post: func(st *SignedToken) { st.Signatures = []Signature{} }, want: ErrInvalidSignature},
		{name: "last signature missing", atts: []Attenuation{a0, a1},
			post: func(st *SignedToken) { st.Signatures = st.Signatures[:2] }, want: ErrInvalidSignature},
		{name: "extra copy of the last signature", atts: []Attenuation{a0, a1},
			post: func(st *SignedToken) { st.Signatures = append(st.Signatures, st.Signatures[2]) }, want: ErrInvalidSignature},
		{name: "extra signature over the authority", atts: []Attenuation{a0},
			post: func(st *SignedToken) { st.Signatures = append(st.Signatures, st.Signatures[0]) }, want: ErrInvalidSignature},
		{name: "extra authority signature on a root token",
			post: func(st *SignedToken) { st.Signatures = append(st.Signatures, st.Signatures[0]) }, want: ErrInvalidSignature},
		{name: "attenuation signatures swapped", atts: []Attenuation{a0, a1},
			post: func(st *SignedToken) { st.Signatures[1], st.Signatures[2] = st.Signatures[2], st.Signatures[1] },
			want: ErrInvalidSignature},
		{name: "attenuation signature covers the wrong index", atts: []Attenuation{a0, a1},
			post: func(st *SignedToken) { st.Signatures[2].Covers = 0 }, want: ErrInvalidSignature},
		{name: "attenuation signature covers the authority", atts: []Attenuation{a0},
			post: func(st *SignedToken) { st.Signatures[1].Covers = AuthorityBlock }, want: ErrInvalidSignature},
		{name: "attenuation signer field is not the attenuator", atts: []Attenuation{a0, a1},
			post: func(st *SignedToken) { st.Signatures[1].Signer = carolKey.ID() }, want: ErrInvalidSignature},
		{name: "attenuation signed by another key", atts: []Attenuation{a0, a1},
			keys: []*identity.Keypair{rootKey, evilKey, bobKey},
			post: func(st *SignedToken) { st.Signatures[1].Signer = aliceKey.ID() }, want: ErrInvalidSignature},
		{name: "attenuation signed over its block without the earlier ones", atts: []Attenuation{a0, a1},
			post: func(st *SignedToken) {
				signedBy(2, bobKey, struct {
					Attenuations []Attenuation `json:"attenuations"`
					Authority    Authority     `json:"authority"`
				}{st.Attenuations[1:], st.Authority})(st)
			}, want: ErrInvalidSignature},
		{name: "attenuation signed over the authority payload", atts: []Attenuation{a0},
			post: func(st *SignedToken) {
				signedBy(1, aliceKey, struct {
					Authority Authority `json:"authority"`
				}{st.Authority})(st)
			}, want: ErrInvalidSignature},
		{name: "attenuation signature reused from another token", atts: []Attenuation{a0},
			post: func(st *SignedToken) {
				other := *st
				other.Attenuations = []Attenuation{withBudget(a0, 1)}
				sign(t, &other, rootKey, aliceKey)
				st.Signatures[1] = other.Signatures[1]
			}, want: ErrInvalidSignature},
		{name: "authority signature over the bare block", post: func(st *SignedToken) {
			signedBy(0, rootKey, st.Authority)(st)
		}, want: ErrInvalidSignature},
	})
}

func TestVerifyChainRules(t *testing.T) {
	scopeCaps := func(want ...Capability) func(*testing.T, *AuthorizedScope) {
		return func(t *testing.T, s *AuthorizedScope) {
			if !reflect.DeepEqual(s.Capabilities, want) {
				t.Errorf("capabilities %v, want %v", s.Capabilities, want)
			}
		}
	}
	runRuleCases(t, []ruleCase{
		// §10.1 4a: each attenuation is made by the current delegatee.
		{name: "first attenuator is not the delegatee", atts: []Attenuation{att(bobKey, carolKey, "del_2")}, want: ErrAttenuationViolation},
		{name: "first attenuator is the issuer", atts: []Attenuation{att(rootKey, carolKey, "del_2")}, want: ErrAttenuationViolation},
		{name: "second attenuator is not the delegatee", atts: []Attenuation{a0, att(aliceKey, carolKey, "del_3")}, want: ErrAttenuationViolation},
		{name: "delegating to oneself", atts: []Attenuation{att(aliceKey, aliceKey, "del_2"), att(aliceKey, bobKey, "del_3")},
			check: func(t *testing.T, s *AuthorizedScope) {
				if s.Delegatee != bobKey.ID() || s.ChainDepth != 2 {
					t.Errorf("scope %+v", s)
				}
			}},

		// 4b: capabilities only narrow, and the narrowed set is what the next
		// block is checked against.
		{name: "resource expansion", atts: []Attenuation{withCaps(a0, Capability{"docs", "read", "/**"})}, want: ErrAttenuationViolation},
		{name: "resource sibling", atts: []Attenuation{withCaps(a0, Capability{"docs", "read", "/projectX/**"})}, want: ErrAttenuationViolation},
		{name: "action expansion", atts: []Attenuation{withCaps(a0, Capability{"docs", "delete", "/project/x"})}, want: ErrAttenuationViolation},
		{name: "namespace expansion", atts: []Attenuation{withCaps(a0, Capability{"web", "read", "/project/x"})}, want: ErrAttenuationViolation},
		{name: "wildcard namespace", atts: []Attenuation{withCaps(a0, Capability{"*", "read", "/project/x"})}, want: ErrAttenuationViolation},
		{name: "wildcard action", atts: []Attenuation{withCaps(a0, Capability{"docs", "*", "/project/x"})}, want: ErrAttenuationViolation},
		{name: "one of two capabilities expands",
			atts: []Attenuation{withCaps(a0, Capability{"docs", "read", "/project/x"}, Capability{"docs", "write", "/project/drafts/a/b"})},
			want: ErrAttenuationViolation},
		{name: "narrower capabilities", atts: []Attenuation{withCaps(a0, Capability{"docs", "read", "/project/sub/*"}, Capability{"docs", "write", "/project/drafts/x"})},
			check: scopeCaps(Capability{"docs", "read", "/project/sub/*"}, Capability{"docs", "write", "/project/drafts/x"})},
		{name: "narrowing takes effect", atts: []Attenuation{withCaps(a0, Capability{"docs", "read", "/project/other/*"})},
			want: ErrCapabilityNotGranted},
		{name: "re-expanding after narrowing",
			atts: []Attenuation{withCaps(a0, Capability{"docs", "read", "/project/sub/**"}), withCaps(a1, Capability{"docs", "read", "/project/**"})},
			want: ErrAttenuationViolation},
		{name: "unset capabilities inherit",
			atts:  []Attenuation{withCaps(a0, Capability{"docs", "read", "/project/sub/**"}), a1},
			check: scopeCaps(Capability{"docs", "read", "/project/sub/**"})},
		{name: "empty capabilities grant nothing", atts: []Attenuation{withCaps(a0)}, want: ErrCapabilityNotGranted},
		{name: "nothing can be added under empty capabilities",
			atts: []Attenuation{withCaps(a0), withCaps(a1, Capability{"docs", "read", "/project/sub/a.txt"})}, want: ErrAttenuationViolation},

		// 4c: budget.
		{name: "budget expansion", atts: []Attenuation{withBudget(a0, 1001)}, want: ErrAttenuationViolation},
		{name: "budget equal to the parent's", atts: []Attenuation{withBudget(a0, 1000)}},
		{name: "budget re-expansion", atts: []Attenuation{withBudget(a0, 500), withBudget(a1, 501)}, want: ErrAttenuationViolation},
		{name: "budget narrowing takes effect", atts: []Attenuation{withBudget(a0, 500), a1},
			req: func(r *Request) { r.SpentMicrocents = 500 }, want: ErrBudgetExceeded},
		{name: "zero budget is a real zero", atts: []Attenuation{withBudget(a0, 0)},
			req: func(r *Request) { r.SpentMicrocents = 0 }, want: ErrBudgetExceeded},

		// 4d: expiry, compared as times, never as strings.
		{name: "expiry expansion", atts: []Attenuation{withExpiry(a0, "2026-01-01T01:00:00.001Z")}, want: ErrAttenuationViolation},
		{name: "expiry equal to the parent's", atts: []Attenuation{withExpiry(a0, "2026-01-01T01:00:00.000Z")}},
		{name: "same expiry written differently", atts: []Attenuation{withExpiry(a0, "2026-01-01T01:00:00Z")}},
		{name: "later expiry that sorts first as a string",
			auth: func(a *Authority) { a.ExpiresAt = "2026-01-01T01:00:00Z" },
			atts: []Attenuation{withExpiry(a0, "2026-01-01T01:00:00.500Z")}, want: ErrAttenuationViolation},
		{name: "earlier expiry that sorts last as a string",
			auth: func(a *Authority) { a.ExpiresAt = "2026-01-01T01:00:00.500Z" },
			atts: []Attenuation{withExpiry(a0, "2026-01-01T01:00:00Z")},
			check: func(t *testing.T, s *AuthorizedScope) {
				if s.ExpiresAt != "2026-01-01T01:00:00.000Z" {
					t.Errorf("expiresAt %s", s.ExpiresAt)
				}
			}},
		{name: "later expiry with a -01:00 offset that sorts first",
			atts: []Attenuation{withExpiry(a0, "2026-01-01T00:30:00-01:00")}, want: ErrAttenuationViolation},
		{name: "earlier expiry with a +02:00 offset that sorts last",
			atts: []Attenuation{withExpiry(a0, "2026-01-01T02:30:00+02:00")},
			check: func(t *testing.T, s *AuthorizedScope) {
				if s.ExpiresAt != "2026-01-01T00:30:00.000Z" {
					t.Errorf("expiresAt %s", s.ExpiresAt)
				}
			}},
		{name: "expiry re-expansion", atts: []Attenuation{withExpiry(a0, "2026-01-01T00:10:00Z"), withExpiry(a1, "2026-01-01T00:20:00Z")},
			want: ErrAttenuationViolation},
		{name: "expiry narrowing takes effect", atts: []Attenuation{withExpiry(a0, "2026-01-01T00:10:00Z"), a1},
			req: func(r *Request) { r.Now = t0.Add(20 * time.Minute) }, want: ErrExpired},

		// 4e: chain depth. The authority leaves maxChainDepth − chainDepth
		// attenuations; an attenuation's maxChainDepth is how many may follow it.
		{name: "authority allows no attenuation", auth: func(a *Authority) { a.MaxChainDepth = 0 },
			atts: []Attenuation{a0}, want: ErrAttenuationViolation},
		{name: "authority chainDepth above its maxChainDepth", auth: func(a *Authority) { a.ChainDepth = 4 },
			want: ErrAttenuationViolation},
		{name: "authority at its maxChainDepth", auth: func(a *Authority) { a.ChainDepth = 3 },
			check: func(t *testing.T, s *AuthorizedScope) {
				if s.ChainDepth != 3 || s.MaxChainDepth != 3 {
					t.Errorf("depth %d of %d", s.ChainDepth, s.MaxChainDepth)
				}
			}},
		{name: "authority at depth 2 of 3 allows one", auth: func(a *Authority) { a.ChainDepth = 2 },
			atts: []Attenuation{a0},
			check: func(t *testing.T, s *AuthorizedScope) {
				if s.ChainDepth != 3 || s.MaxChainDepth != 3 {
					t.Errorf("depth %d of %d", s.ChainDepth, s.MaxChainDepth)
				}
			}},
		{name: "authority at depth 2 of 3 refuses two", auth: func(a *Authority) { a.ChainDepth = 2 },
			atts: []Attenuation{a0, a1}, want: ErrAttenuationViolation},
		{name: "exactly maxChainDepth attenuations", auth: func(a *Authority) { a.MaxChainDepth = 2 },
			atts: []Attenuation{a0, a1}},
		{name: "more attenuations than maxChainDepth", auth: func(a *Authority) { a.MaxChainDepth = 2 },
			atts: []Attenuation{a0, a1, a2}, want: ErrAttenuationViolation},
		{name: "attenuation maxChainDepth equal to what remains", atts: []Attenuation{withDepth(a0, 3)}, want: ErrAttenuationViolation},
		{name: "attenuation maxChainDepth one below what remains", atts: []Attenuation{withDepth(a0, 2)},
			check: func(t *testing.T, s *AuthorizedScope) {
				if s.ChainDepth != 1 || s.MaxChainDepth != 3 {
					t.Errorf("depth %d of %d", s.ChainDepth, s.MaxChainDepth)
				}
			}},
		{name: "attenuation maxChainDepth 0 ends the chain", atts: []Attenuation{withDepth(a0, 0), a1}, want: ErrAttenuationViolation},
		{name: "attenuation maxChainDepth 0 alone", atts: []Attenuation{withDepth(a0, 0)},
			check: func(t *testing.T, s *AuthorizedScope) {
				if s.ChainDepth != 1 || s.MaxChainDepth != 1 {
					t.Errorf("depth %d of %d", s.ChainDepth, s.MaxChainDepth)
				}
			}},
		{name: "attenuation maxChainDepth becomes what remains", atts: []Attenuation{withDepth(a0, 1), a1}},
		{name: "attenuation maxChainDepth limits later blocks", atts: []Attenuation{withDepth(a0, 1), a1, a2}, want: ErrAttenuationViolation},
		{name: "second maxChainDepth not below what remains", atts: []Attenuation{withDepth(a0, 1), withDepth(a1, 1)}, want: ErrAttenuationViolation},
		{name: "unset maxChainDepth uses one", auth: func(a *Authority) { a.MaxChainDepth = 2 },
			atts: []Attenuation{a0, withDepth(a1, 1)}, want: ErrAttenuationViolation},
	})
}

func TestVerifyRequest(t *testing.T) {
	issued := "2026-01-01T00:00:00.000Z"
	runRuleCases(t, []ruleCase{
		// §10.1 step 5, and issuedAt.
		{name: "at the expiry instant", req: func(r *Request) { r.Now = t0.Add(time.Hour) }},
		{name: "just after expiry", req: func(r *Request) { r.Now = t0.Add(time.Hour + time.Nanosecond) }, want: ErrExpired},
		{name: "expiry with an offset, before", auth: func(a *Authority) { a.ExpiresAt = "2026-01-01T01:00:00+02:00" },
			req:  func(r *Request) { r.Now = time.Date(2025, 12, 31, 22, 59, 0, 0, time.UTC); r.SpentMicrocents = 0 },
			opts: Options{ClockSkew: 2 * time.Hour}},
		{name: "expiry with an offset, after", auth: func(a *Authority) { a.ExpiresAt = "2026-01-01T01:00:00+02:00" },
			req: func(r *Request) { r.Now = time.Date(2025, 12, 31, 23, 0, 1, 0, time.UTC) }, opts: Options{ClockSkew: 2 * time.Hour},
			want: ErrExpired},
		{name: "issued within the default clock skew", req: func(r *Request) { r.Now = t0.Add(-DefaultClockSkew) }},
		{name: "issued beyond the default clock skew", req: func(r *Request) { r.Now = t0.Add(-DefaultClockSkew - time.Nanosecond) }, want: ErrExpired},
		{name: "issued within a configured clock skew", opts: Options{ClockSkew: time.Minute}, req: func(r *Request) { r.Now = t0.Add(-time.Minute) }},
		{name: "issued beyond a configured clock skew", opts: Options{ClockSkew: time.Minute},
			req: func(r *Request) { r.Now = t0.Add(-time.Minute - time.Millisecond) }, want: ErrExpired},
		{name: "issued with an offset", auth: func(a *Authority) { a.IssuedAt = "2026-01-01T02:00:00+02:00" },
			req: func(r *Request) { r.Now = t0.Add(-DefaultClockSkew) }},
		{name: "issued later than written in UTC", auth: func(a *Authority) { a.IssuedAt = "2026-01-01T00:00:00-01:00" },
			req: func(r *Request) { r.Now = t0.Add(30 * time.Minute) }, want: ErrExpired},
		{name: "issued exactly now", auth: func(a *Authority) { a.IssuedAt = issued }, req: func(r *Request) { r.Now = t0 }},

		// Step 6.
		{name: "spent just under the budget", req: func(r *Request) { r.SpentMicrocents = 999 },
			check: func(t *testing.T, s *AuthorizedScope) {
				if s.RemainingBudgetMicrocents != 1 {
					t.Errorf("remaining %d", s.RemainingBudgetMicrocents)
				}
			}},
		{name: "spent the whole budget", req: func(r *Request) { r.SpentMicrocents = 1000 }, want: ErrBudgetExceeded},
		{name: "spent over the budget", req: func(r *Request) { r.SpentMicrocents = 1 << 40 }, want: ErrBudgetExceeded},
		{name: "negative spend", req: func(r *Request) { r.SpentMicrocents = -1 }, want: ErrBudgetExceeded},
		{name: "zero budget", auth: func(a *Authority) { a.MaxBudgetMicrocents = 0 }, want: ErrBudgetExceeded},

		// Step 7.
		{name: "granted by the second capability", req: func(r *Request) { r.Action = "write"; r.Resource = "/project/drafts/x" }},
		{name: "action not granted", req: func(r *Request) { r.Action = "write" }, want: ErrCapabilityNotGranted},
		{name: "namespace not granted", req: func(r *Request) { r.Namespace = "web" }, want: ErrCapabilityNotGranted},
		{name: "resource not granted", req: func(r *Request) { r.Resource = "/other/a.txt" }, want: ErrCapabilityNotGranted},
		{name: "resource escaping with dot segments", req: func(r *Request) { r.Resource = "/project/../secret" }, want: ErrCapabilityNotGranted},
		{name: "namespace and action are not globs", req: func(r *Request) { r.Namespace = "*"; r.Action = "*" }, want: ErrCapabilityNotGranted},
		{name: "wildcard namespace and action granted", auth: func(a *Authority) { a.Capabilities = []Capability{{"*", "*", "/project/**"}} },
			req: func(r *Request) { r.Namespace = "web"; r.Action = "search" }},
		{name: "universal resource", auth: func(a *Authority) { a.Capabilities = []Capability{{"docs", "read", "*"}} },
			req: func(r *Request) { r.Resource = "/anything/../at/all" }},
		{name: "no capabilities", auth: func(a *Authority) { a.Capabilities = []Capability{} }, want: ErrCapabilityNotGranted},
	})
}

func TestVerifyCapabilityDenialDetail(t *testing.T) {
	v := mustVerifier(t, Options{})
	tok := mustCreate(t, rootParams())
	req := readReq()
	req.Resource = "/elsewhere"
	_, err := v.Verify(tok.String(), req)
	var d *Denial
	if !errors.As(err, &d) || d.Type != CapabilityNotGranted {
		t.Fatalf("got %v", err)
	}
	want := &Capability{"docs", "read", "/elsewhere"}
	if !reflect.DeepEqual(d.Requested, want) {
		t.Errorf("requested %+v, want %+v", d.Requested, want)
	}
	if !reflect.DeepEqual(d.Granted, projectCaps) {
		t.Errorf("granted %+v, want %+v", d.Granted, projectCaps)
	}
	// The denial is the caller's: editing it changes nothing in the verifier.
	d.Granted[0] = Capability{"*", "*", "*"}
	if _, err := v.Verify(tok.String(), req); !errors.Is(err, ErrCapabilityNotGranted) {
		t.Fatalf("after editing a denial: %v", err)
	}
}

func TestVerifyExpiredDetail(t *testing.T) {
	v := mustVerifier(t, Options{})
	s := mustCreate(t, rootParams()).String()
	for _, c := range []struct {
		now    time.Time
		detail string
	}{
		{t0.Add(2 * time.Hour), "token expired at 2026-01-01T01:00:00.000Z"},
		{t0.Add(-time.Hour), "not valid yet"},
	} {
		req := readReq()
		req.Now = c.now
		_, err := v.Verify(s, req)
		wantDenial(t, err, ErrExpired)
		if !strings.Contains(err.Error(), c.detail) {
			t.Errorf("at %v: %q does not say %q", c.now, err, c.detail)
		}
	}
}

func TestVerifyZeroNowIsWallClock(t *testing.T) {
	p := rootParams()
	p.IssuedAt = time.Now()
	p.ExpiresAt = p.IssuedAt.Add(time.Hour)
	live := mustCreate(t, p).String()
	p.IssuedAt = time.Now().Add(-2 * time.Hour)
	p.ExpiresAt = p.IssuedAt.Add(time.Hour)
	dead := mustCreate(t, p).String()
	v := mustVerifier(t, Options{})
	req := readReq()
	req.Now = time.Time{}
	if _, err := v.Verify(live, req); err != nil {
		t.Errorf("live token: %v", err)
	}
	_, err := v.Verify(dead, req)
	wantDenial(t, err, ErrExpired)
}

func TestVerifyRevocation(t *testing.T) {
	tok := chain2(t)
	ids := tok.RevocationIDs()
	for i, id := range ids {
		t.Run(tok.Signers()[i][:8], func(t *testing.T) {
			revs := &fakeRevocations{}
			revs.revoke(id)
			v := mustVerifier(t, Options{Revocations: revs})
			_, err := v.Verify(tok.String(), readReq())
			wantDenial(t, err, ErrRevoked)
			var d *Denial
			errors.As(err, &d)
			if d.RevocationID != id {
				t.Errorf("revocation ID %q, want %q", d.RevocationID, id)
			}
		})
	}

	t.Run("list consulted with every block", func(t *testing.T) {
		revs := &fakeRevocations{}
		v := mustVerifier(t, Options{Revocations: revs})
		if _, err := v.Verify(tok.String(), readReq()); err != nil {
			t.Fatal(err)
		}
		// The IDs are BLAKE2b-256 of each block's canonical JSON (§3.5),
		// computed here with the generic canonicalizer.
		st := tok.Unverified()
		blocks := []any{st.Authority, st.Attenuations[0], st.Attenuations[1]}
		var want []string
		for _, b := range blocks {
			c, err := canon.Marshal(b)
			if err != nil {
				t.Fatal(err)
			}
			d := sig.Digest(c)
			want = append(want, b64.Encode(d[:]))
		}
		if !reflect.DeepEqual(revs.gotIDs, want) || !reflect.DeepEqual(ids, want) {
			t.Errorf("revocation IDs\n got %v\n tok %v\nwant %v", revs.gotIDs, ids, want)
		}
		wantSigners := []string{rootKey.ID(), aliceKey.ID(), bobKey.ID()}
		if !reflect.DeepEqual(revs.gotSign, wantSigners) {
			t.Errorf("signers %v, want %v", revs.gotSign, wantSigners)
		}
	})

	t.Run("unreadable list denies", func(t *testing.T) {
		v := mustVerifier(t, Options{Revocations: &fakeRevocations{err: errors.New("list unreadable")}})
		_, err := v.Verify(tok.String(), readReq())
		wantDenial(t, err, ErrRevoked)
	})

	t.Run("an unrelated revocation does not deny", func(t *testing.T) {
		revs := &fakeRevocations{}
		revs.revoke(mustCreate(t, rootParams()).RevocationIDs()[0] + "x")
		v := mustVerifier(t, Options{Revocations: revs})
		if _, err := v.Verify(tok.String(), readReq()); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("checked before signatures", func(t *testing.T) {
		// §10.1 orders revocation (step 2) before signatures (step 3).
		st := tok.Unverified()
		st.Signatures[2].Signature = st.Signatures[1].Signature
		revs := &fakeRevocations{}
		revs.revoke(ids[0])
		v := mustVerifier(t, Options{Revocations: revs})
		_, err := v.Verify(serialize(t, st), readReq())
		wantDenial(t, err, ErrRevoked)
	})
}

func TestNewVerifier(t *testing.T) {
	for _, c := range []struct {
		name  string
		roots []string
		ok    bool
	}{
		{"no roots", nil, false},
		{"empty roots", []string{}, false},
		{"invalid root", []string{"not-a-key"}, false},
		{"one bad root among good", []string{rootKey.ID(), "did:key:zzz"}, false},
		{"principal ID", []string{rootKey.ID()}, true},
		{"did:key", []string{rootKey.DID()}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := NewVerifier(Options{Roots: c.roots})
			if c.ok != (err == nil) || c.ok != (v != nil) {
				t.Fatalf("NewVerifier(%q) = %v, %v", c.roots, v, err)
			}
		})
	}
}

// A zero Verifier trusts nothing.
func TestZeroVerifier(t *testing.T) {
	var v Verifier
	_, err := v.Verify(chain2(t).String(), readReq())
	wantDenial(t, err, ErrInvalidSignature)
}

func TestDenial(t *testing.T) {
	sentinels := []*Denial{ErrMalformed, ErrRevoked, ErrInvalidSignature, ErrAttenuationViolation, ErrExpired, ErrBudgetExceeded, ErrCapabilityNotGranted}
	types := []DenialType{"malformed_token", "revoked", "invalid_signature", "attenuation_violation", "expired", "budget_exceeded", "capability_not_granted"}
	for i, s := range sentinels {
		if s.Type != types[i] || s.Error() != string(types[i]) {
			t.Errorf("sentinel %d is %q / %q, want %q", i, s.Type, s.Error(), types[i])
		}
		d := deny(s.Type, "detail %d", i)
		if d.Error() != string(types[i])+": detail "+string(rune('0'+i)) {
			t.Errorf("Error() = %q", d.Error())
		}
		for j, other := range sentinels {
			if got := errors.Is(d, other); got != (i == j) {
				t.Errorf("errors.Is(%s, %s) = %v", d.Type, other.Type, got)
			}
		}
		if errors.Is(d, errors.New(string(types[i]))) {
			t.Errorf("%s matches a plain error", d.Type)
		}
	}
}

func TestVerifyChain(t *testing.T) {
	tok := chain2(t)
	revs := &fakeRevocations{}
	v := mustVerifier(t, Options{Revocations: revs})
	scope, err := v.VerifyChain(tok.String(), t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	want, err := mustVerifier(t, Options{}).Verify(tok.String(), readReq())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(scope, want) {
		t.Errorf("VerifyChain scope\n got %+v\nwant %+v", scope, want)
	}

	// No budget or capability: a token that grants nothing is still a valid chain.
	a := baseAuthority()
	a.MaxBudgetMicrocents = 0
	a.Capabilities = []Capability{}
	if _, err := v.VerifyChain(handToken(t, a, nil, rootKey), t0); err != nil {
		t.Errorf("empty grant: %v", err)
	}

	st := tok.Unverified()
	st.Attenuations[1].DelegationID = "del_x"
	p := rootParams()
	p.Issuer = evilKey
	for _, c := range []struct {
		name  string
		token string
		now   time.Time
		want  *Denial
	}{
		{"expired", tok.String(), t0.Add(31 * time.Minute), ErrExpired},
		{"not valid yet", tok.String(), t0.Add(-time.Minute), ErrExpired},
		{"wall clock", tok.String(), time.Time{}, ErrExpired},
		{"tampered", serialize(t, st), t0, ErrInvalidSignature},
		{"untrusted root", mustCreate(t, p).String(), t0, ErrInvalidSignature},
		{"broken chain", handToken(t, baseAuthority(), []Attenuation{withBudget(a0, 1001)}, rootKey, aliceKey), t0, ErrAttenuationViolation},
		{"malformed", tok.String() + "A", t0, ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := v.VerifyChain(c.token, c.now)
			wantDenial(t, err, c.want)
		})
	}
	t.Run("revoked", func(t *testing.T) {
		revs.revoke(tok.RevocationIDs()[1])
		_, err := v.VerifyChain(tok.String(), t0) // cached by now
		wantDenial(t, err, ErrRevoked)
	})
}
