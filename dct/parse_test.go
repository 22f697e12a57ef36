package dct

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/canon"
)

func TestParseRoundTrip(t *testing.T) {
	for _, tok := range []*Token{mustCreate(t, rootParams()), chain2(t), chainN(t, 8)} {
		s := tok.String()
		got, err := Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != s {
			t.Error("String() differs from the parsed input")
		}
		if got.Serialized() != (Serialized{Token: s, Format: Format}) {
			t.Errorf("Serialized() = %+v", got.Serialized())
		}
		c, err := canon.Marshal(got.Unverified())
		if err != nil {
			t.Fatal(err)
		}
		if b64.Encode(c) != s {
			t.Error("the token is not the canonical JSON of what it decodes to")
		}
	}
}

// nonCanonical rewrites the JSON of a valid token into something encoding/json
// would read the same (or nearly), but which is not the canonical form.
type nonCanonical struct {
	name     string
	old, new string // replace exactly one occurrence; old "" means apply edit
	edit     func(string) string
}

func TestParseNonCanonical(t *testing.T) {
	tok := chain2(t)
	j := string(decodeJSON(t, tok.String()))
	bob := bobKey.ID()
	cases := []nonCanonical{
		{name: "leading space", edit: func(s string) string { return " " + s }},
		{name: "trailing newline", edit: func(s string) string { return s + "\n" }},
		{name: "byte order mark", edit: func(s string) string { return "\ufeff" + s }},
		{name: "space after a colon", old: `"format":"`, new: `"format": "`},
		{name: "newline between members", old: `,"format"`, new: ",\n\"format\""},
		{name: "top-level members in struct order", edit: func(string) string {
			b, err := json.Marshal(tok.Unverified())
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}},
		{name: "capability members reordered", old: `{"action":"write","namespace":"docs",`, new: `{"namespace":"docs","action":"write",`},
		{name: "duplicate member, same value", old: `"format":"delegateos-sjt-v1"`, new: `"format":"delegateos-sjt-v1","format":"delegateos-sjt-v1"`},
		{name: "duplicate member, the last one is the original", old: `"delegationId":"del_000000000001"`,
			new: `"delegationId":"del_000000000009","delegationId":"del_000000000001"`},
		{name: "duplicate member, the first one is the original", old: `"delegationId":"del_000000000001"`,
			new: `"delegationId":"del_000000000001","delegationId":"del_000000000009"`},
		{name: "duplicate attenuation member", old: `"maxBudgetMicrocents":500`, new: `"maxBudgetMicrocents":500,"maxBudgetMicrocents":500`},
		{name: "member name re-cased", old: `"issuer":`, new: `"Issuer":`},
		{name: "top-level member re-cased", old: `"format":`, new: `"Format":`},
		{name: "member name escaped", old: `"issuer":`, new: `"issu\u0065r":`},
		{name: "unknown authority member", old: `"parentDelegationId":"del_000000000000"}`, new: `"parentDelegationId":"del_000000000000","zzz":1}`},
		{name: "unknown top-level member", edit: func(s string) string { return s[:len(s)-1] + `,"zzz":1}` }},
		{name: "unknown signature member", old: `"covers":"authority",`, new: `"covers":"authority","note":"",`},
		{name: "number as 1e3", old: `"maxBudgetMicrocents":1000`, new: `"maxBudgetMicrocents":1e3`},
		{name: "number as 1000.0", old: `"maxBudgetMicrocents":1000`, new: `"maxBudgetMicrocents":1000.0`},
		{name: "number as 1.0", old: `"maxChainDepth":1}`, new: `"maxChainDepth":1.0}`},
		{name: "number as -0", old: `"chainDepth":0`, new: `"chainDepth":-0`},
		{name: "number with a leading zero", old: `"maxChainDepth":3`, new: `"maxChainDepth":03`},
		{name: "number as a string", old: `"maxChainDepth":3`, new: `"maxChainDepth":"3"`},
		{name: "covers as a string", old: `"covers":0`, new: `"covers":"0"`},
		{name: "covers as 0.0", old: `"covers":0`, new: `"covers":0.0`},
		{name: "covers as -0", old: `"covers":0`, new: `"covers":-0`},
		{name: "covers re-cased", old: `"covers":"authority"`, new: `"covers":"Authority"`},
		{name: "covers escaped", old: `"covers":"authority"`, new: `"covers":"\u0061uthority"`},
		{name: "null for an unset optional member", old: `"delegationId":"del_000000000003"}`, new: `"delegationId":"del_000000000003","expiresAt":null}`},
		{name: "null capabilities for an unset attenuation", old: `{"attenuator":"` + bob, new: `{"allowedCapabilities":null,"attenuator":"` + bob},
		{name: "null for a set optional member", old: `"maxChainDepth":1}`, new: `"maxChainDepth":null}`},
		{name: "null for a required string", old: `"parentDelegationId":"del_000000000000"`, new: `"parentDelegationId":null`},
		{name: "null for a required number", old: `"chainDepth":0`, new: `"chainDepth":null`},
		{name: "null authority capabilities", old: `"capabilities":[{"action":"read","namespace":"docs","resource":"/project/**"},{"action":"write","namespace":"docs","resource":"/project/drafts/*"}]`, new: `"capabilities":null`},
		{name: "lone surrogate escape", old: `"ct_000000000001"`, new: `"ct_\ud800"`},
		{name: "escaped surrogate pair", old: `"ct_000000000001"`, new: `"ct_\ud83d\ude00"`},
		{name: "invalid UTF-8", old: `"ct_000000000001"`, new: "\"ct_\xff\""},
		{name: "overlong UTF-8", old: `"ct_000000000001"`, new: "\"ct_\xc0\xaf\""},
		{name: "UTF-8 surrogate", old: `"ct_000000000001"`, new: "\"ct_\xed\xa0\x80\""},
		{name: "needless escape", old: `"ct_000000000001"`, new: `"ct_\u003000000000001"`},
		{name: "escaped solidus", old: `"/project/**"`, new: `"\/project/**"`},
		{name: "trailing data", edit: func(s string) string { return s + "{}" }},
		{name: "truncated", edit: func(s string) string { return s[:len(s)-1] }},
		{name: "empty object", edit: func(string) string { return "{}" }},
		{name: "array", edit: func(string) string { return "[]" }},
		{name: "null", edit: func(string) string { return "null" }},
		{name: "nothing", edit: func(string) string { return "" }},
		{name: "deep nesting", edit: func(s string) string {
			return strings.Replace(s, `"format":"delegateos-sjt-v1"`, `"format":`+strings.Repeat("[", 10000)+strings.Repeat("]", 10000), 1)
		}},
	}
	// Escapes of characters the canonical form writes otherwise.
	escTok := func(contract string) string {
		a := baseAuthority()
		a.ContractID = contract
		return string(decodeJSON(t, handToken(t, a, nil, rootKey)))
	}
	for _, c := range []struct{ name, raw, canonical, variant string }{
		{"upper-case hex escape", "ct_\x1f", `"ct_\u001f"`, `"ct_\u001F"`},
		{"\\u escape for a newline", "ct_\n", `"ct_\n"`, `"ct_\u000a"`},
		{"\\u escape for a quote", `ct_"`, `"ct_\""`, `"ct_\u0022"`},
		{"escaped U+2028", "ct_\u2028", "\"ct_\u2028\"", `"ct_\u2028"`},
		{"escaped DEL", "ct_\x7f", "\"ct_\x7f\"", `"ct_\u007f"`},
		{"escaped non-ASCII", "ct_é", `"ct_é"`, `"ct_\u00e9"`},
		{"escaped <", "ct_<", `"ct_<"`, `"ct_\u003c"`},
	} {
		base := escTok(c.raw)
		if _, err := Parse(b64.Encode([]byte(base))); err != nil {
			t.Fatalf("%s: canonical token does not parse: %v", c.name, err)
		}
		if !strings.Contains(base, c.canonical) {
			t.Fatalf("%s: canonical form %s not in %s", c.name, c.canonical, base)
		}
		cases = append(cases, nonCanonical{name: c.name, edit: func(string) string {
			return strings.Replace(base, c.canonical, c.variant, 1)
		}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s string
			if c.edit != nil {
				s = c.edit(j)
			} else {
				if strings.Count(j, c.old) != 1 {
					t.Fatalf("%q occurs %d times", c.old, strings.Count(j, c.old))
				}
				s = strings.Replace(j, c.old, c.new, 1)
			}
			if s == j {
				t.Fatal("variant equals the canonical token")
			}
			_, err := Parse(b64.Encode([]byte(s)))
			wantDenial(t, err, ErrMalformed)
			_, err = mustVerifier(t, Options{}).Verify(b64.Encode([]byte(s)), readReq())
			wantDenial(t, err, ErrMalformed)
		})
	}
}

func TestParseBase64(t *testing.T) {
	// A token with padding bits, using both characters particular to the
	// URL alphabet ('~', '?' and '>' at every offset produce them).
	var s string
	for _, contract := range []string{"ct_~~~???>>>", "ct_~~~???>>>x", "ct_~~~???>>>xx"} {
		a := baseAuthority()
		a.ContractID = contract
		if c := handToken(t, a, nil, rootKey); len(c)%4 != 0 {
			s = c
			break
		}
	}
	if !strings.Contains(s, "-") || !strings.Contains(s, "_") {
		t.Fatalf("unsuitable token %s", s)
	}
	if _, err := Parse(s); err != nil {
		t.Fatal(err)
	}
	std := strings.NewReplacer("-", "+", "_", "/").Replace(s)
	last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", s[len(s)-1])
	for name, bad := range map[string]string{
		"padded":                 s + strings.Repeat("=", 4-len(s)%4),
		"standard alphabet":      std,
		"standard, padded":       std + strings.Repeat("=", 4-len(s)%4),
		"non-zero padding bits":  s[:len(s)-1] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last+1]),
		"newline inside":         s[:40] + "\n" + s[40:],
		"space inside":           s[:40] + " " + s[40:],
		"not base64":             s[:40] + "!" + s[41:],
		"empty":                  "",
		"one character":          "e",
		"wrapper-looking, inner": s + "{}",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(bad)
			wantDenial(t, err, ErrMalformed)
			_, err = ParseInput(bad)
			wantDenial(t, err, ErrMalformed)
		})
	}
}

func TestParseInput(t *testing.T) {
	s := chain2(t).String()
	wrap := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	good := map[string]string{
		"bare":                     s,
		"bare with whitespace":     "\n\t " + s + " \r\n",
		"wrapper":                  wrap(Serialized{Token: s, Format: Format}),
		"wrapper, members swapped": `{"format":"` + Format + `","token":"` + s + `"}`,
		"wrapper, pretty":          "  {\n  \"token\": \"" + s + "\",\n  \"format\": \"" + Format + "\"\n}\n",
	}
	for name, in := range good {
		t.Run(name, func(t *testing.T) {
			tok, err := ParseInput(in)
			if err != nil {
				t.Fatal(err)
			}
			if tok.String() != s {
				t.Fatal("parsed a different token")
			}
			if _, err := mustVerifier(t, Options{}).Verify(in, readReq()); err != nil {
				t.Fatal(err)
			}
		})
	}
	bad := map[string]string{
		"unknown format":          `{"token":"` + s + `","format":"delegateos-sjt-v2"}`,
		"no format":               `{"token":"` + s + `"}`,
		"empty format":            `{"token":"` + s + `","format":""}`,
		"no token":                `{"format":"` + Format + `"}`,
		"null token":              `{"token":null,"format":"` + Format + `"}`,
		"token as a number":       `{"token":1,"format":"` + Format + `"}`,
		"token as an object":      `{"token":{"token":"` + s + `"},"format":"` + Format + `"}`,
		"duplicate token":         `{"token":"x","token":"` + s + `","format":"` + Format + `"}`,
		"duplicate token, same":   `{"token":"` + s + `","token":"` + s + `","format":"` + Format + `"}`,
		"duplicate format":        `{"token":"` + s + `","format":"x","format":"` + Format + `"}`,
		"re-cased member":         `{"Token":"` + s + `","format":"` + Format + `"}`,
		"re-cased format member":  `{"token":"` + s + `","FORMAT":"` + Format + `"}`,
		"unknown member":          `{"token":"` + s + `","format":"` + Format + `","dct":"x"}`,
		"trailing data":           `{"token":"` + s + `","format":"` + Format + `"}{}`,
		"trailing garbage":        `{"token":"` + s + `","format":"` + Format + `"}x`,
		"truncated":               `{"token":"` + s + `","format":"` + Format + `"`,
		"invalid UTF-8":           `{"token":"` + s + `","format":"` + Format + "\xff\"}",
		"wrapper in a wrapper":    wrap(Serialized{Token: wrap(Serialized{Token: s, Format: Format}), Format: Format}),
		"token with whitespace":   `{"token":" ` + s + `","format":"` + Format + `"}`,
		"over the wrapper limit":  `{"token":"` + s + `",` + strings.Repeat(" ", MaxWrapperLen) + `"format":"` + Format + `"}`,
		"over the limit inside":   `{"token":"` + s + `","format":"` + Format + `","x":"` + strings.Repeat("a", MaxWrapperLen) + `"}`,
		"array":                   `[` + s + `]`,
		"empty":                   ``,
		"whitespace":              " \n",
		"format in another case":  `{"token":"` + s + `","format":"DELEGATEOS-SJT-V1"}`,
		"token JSON, not base64":  string(decodeJSON(t, s)),
		"wrapper with bad token":  `{"token":"` + s[:len(s)-1] + `","format":"` + Format + `"}`,
		"wrapper with null value": `{"token":"` + s + `","format":null}`,
	}
	for name, in := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := ParseInput(in)
			wantDenial(t, err, ErrMalformed)
			_, err = mustVerifier(t, Options{}).Verify(in, readReq())
			wantDenial(t, err, ErrMalformed)
		})
	}
	t.Run("ParseSerialized", func(t *testing.T) {
		if _, err := ParseSerialized(Serialized{Token: s, Format: Format}); err != nil {
			t.Fatal(err)
		}
		_, err := ParseSerialized(Serialized{Token: s, Format: "sjt"})
		wantDenial(t, err, ErrMalformed)
	})
}

// limitCase builds a hand-signed token at a limit (ok) and one past it.
type limitCase struct {
	name string
	at   func(tb testing.TB) string
	past func(tb testing.TB) string
}

// repeatCaps is n copies of c.
func repeatCaps(n int, c Capability) []Capability {
	caps := make([]Capability, n)
	for i := range caps {
		caps[i] = c
	}
	return caps
}

// longChain is a hand-signed token with n attenuations, alternating alice
// and bob, under a root that allows them, with extraSigs signatures added
// (or, when negative, removed) at the end.
func longChain(tb testing.TB, n int, extraSigs int) string {
	a := baseAuthority()
	a.MaxChainDepth = int64(n)
	keys := []*identity.Keypair{aliceKey, bobKey}
	st := SignedToken{Format: Format, Authority: a, Attenuations: []Attenuation{}}
	signers := []*identity.Keypair{rootKey}
	for i := range n {
		st.Attenuations = append(st.Attenuations, att(keys[i%2], keys[(i+1)%2], "del_"+strconv.Itoa(i)))
		signers = append(signers, keys[i%2])
	}
	sign(tb, &st, signers...)
	for range extraSigs {
		st.Signatures = append(st.Signatures, st.Signatures[0])
	}
	if extraSigs < 0 {
		st.Signatures = st.Signatures[:len(st.Signatures)+extraSigs]
	}
	return serialize(tb, st)
}

// sizedToken is a valid root token whose serialized form is exactly n
// characters long (n a multiple of 4), padded with capabilities.
func sizedToken(tb testing.TB, n int) string {
	tb.Helper()
	jsonLen := n / 4 * 3
	a := baseAuthority()
	a.Capabilities = repeatCaps(60, Capability{"docs", "read", "/" + strings.Repeat("x", 700)})
	diff := jsonLen - len(decodeJSON(tb, handToken(tb, a, nil, rootKey)))
	for i := range a.Capabilities {
		c := &a.Capabilities[i]
		c.Resource += strings.Repeat("y", diff/len(a.Capabilities))
		if i == len(a.Capabilities)-1 {
			c.Resource += strings.Repeat("y", diff%len(a.Capabilities))
		}
		if len(c.Resource) > MaxResourceLen {
			tb.Fatalf("resource %d bytes", len(c.Resource))
		}
	}
	s := handToken(tb, a, nil, rootKey)
	if len(s) != n {
		tb.Fatalf("sized token is %d characters, want %d", len(s), n)
	}
	return s
}

func TestParseLimits(t *testing.T) {
	auth := func(m func(*Authority)) func(testing.TB) string {
		return func(tb testing.TB) string {
			a := baseAuthority()
			m(&a)
			return handToken(tb, a, nil, rootKey)
		}
	}
	at0 := func(m func(*Attenuation)) func(testing.TB) string {
		return func(tb testing.TB) string {
			x := a0
			m(&x)
			return handToken(tb, baseAuthority(), []Attenuation{x}, rootKey, aliceKey)
		}
	}
	str := func(n int) string { return strings.Repeat("s", n) }
	segs := func(n int) string { return strings.Repeat("/a", n-1) }
	cases := []limitCase{
		{"token length",
			func(tb testing.TB) string { return sizedToken(tb, MaxTokenLen) },
			func(tb testing.TB) string { return sizedToken(tb, MaxTokenLen+4) }},
		{"attenuations",
			func(tb testing.TB) string { return longChain(tb, MaxAttenuations, 0) },
			func(tb testing.TB) string { return longChain(tb, MaxAttenuations+1, 0) }},
		{"signatures",
			func(tb testing.TB) string { return longChain(tb, MaxAttenuations, 0) },
			func(tb testing.TB) string { return longChain(tb, MaxAttenuations, 1) }},
		{"attenuations, with no more signatures than allowed",
			func(tb testing.TB) string { return longChain(tb, MaxAttenuations, 0) },
			func(tb testing.TB) string { return longChain(tb, MaxAttenuations+1, -1) }},
		{"authority capabilities",
			auth(func(a *Authority) { a.Capabilities = repeatCaps(MaxCapabilities, projectCaps[0]) }),
			auth(func(a *Authority) { a.Capabilities = repeatCaps(MaxCapabilities+1, projectCaps[0]) })},
		{"attenuation capabilities",
			at0(func(a *Attenuation) { c := repeatCaps(MaxCapabilities, projectCaps[0]); a.AllowedCapabilities = &c }),
			at0(func(a *Attenuation) { c := repeatCaps(MaxCapabilities+1, projectCaps[0]); a.AllowedCapabilities = &c })},
		{"namespace length",
			auth(func(a *Authority) { a.Capabilities[0].Namespace = str(MaxStringLen) }),
			auth(func(a *Authority) { a.Capabilities[0].Namespace = str(MaxStringLen + 1) })},
		{"empty namespace",
			auth(func(a *Authority) { a.Capabilities[0].Namespace = "n" }),
			auth(func(a *Authority) { a.Capabilities[0].Namespace = "" })},
		{"action length",
			auth(func(a *Authority) { a.Capabilities[0].Action = str(MaxStringLen) }),
			auth(func(a *Authority) { a.Capabilities[0].Action = str(MaxStringLen + 1) })},
		{"empty action",
			auth(func(a *Authority) { a.Capabilities[0].Action = "a" }),
			auth(func(a *Authority) { a.Capabilities[0].Action = "" })},
		{"attenuation namespace length",
			at0(func(a *Attenuation) { a.AllowedCapabilities = &[]Capability{{str(MaxStringLen), "read", "/"}} }),
			at0(func(a *Attenuation) { a.AllowedCapabilities = &[]Capability{{str(MaxStringLen + 1), "read", "/"}} })},
		{"resource length",
			auth(func(a *Authority) { a.Capabilities[0].Resource = "/" + str(MaxResourceLen-1) }),
			auth(func(a *Authority) { a.Capabilities[0].Resource = "/" + str(MaxResourceLen) })},
		{"resource segments",
			auth(func(a *Authority) { a.Capabilities[0].Resource = segs(MaxResourceSegments) }),
			auth(func(a *Authority) { a.Capabilities[0].Resource = segs(MaxResourceSegments + 1) })},
		{"attenuation resource segments",
			at0(func(a *Attenuation) {
				a.AllowedCapabilities = &[]Capability{{"docs", "read", "/project" + segs(MaxResourceSegments-1)}}
			}),
			at0(func(a *Attenuation) {
				a.AllowedCapabilities = &[]Capability{{"docs", "read", "/project" + segs(MaxResourceSegments)}}
			})},
		{"contractId length",
			auth(func(a *Authority) { a.ContractID = str(MaxStringLen) }),
			auth(func(a *Authority) { a.ContractID = str(MaxStringLen + 1) })},
		{"delegationId length",
			auth(func(a *Authority) { a.DelegationID = str(MaxStringLen) }),
			auth(func(a *Authority) { a.DelegationID = str(MaxStringLen + 1) })},
		{"parentDelegationId length",
			auth(func(a *Authority) { a.ParentDelegationID = str(MaxStringLen) }),
			auth(func(a *Authority) { a.ParentDelegationID = str(MaxStringLen + 1) })},
		{"attenuation contractId length",
			at0(func(a *Attenuation) { a.ContractID = str(MaxStringLen) }),
			at0(func(a *Attenuation) { a.ContractID = str(MaxStringLen + 1) })},
		{"attenuation delegationId length",
			at0(func(a *Attenuation) { a.DelegationID = str(MaxStringLen) }),
			at0(func(a *Attenuation) { a.DelegationID = str(MaxStringLen + 1) })},
		{"budget range",
			auth(func(a *Authority) { a.MaxBudgetMicrocents = canon.MaxSafeInteger }),
			auth(func(a *Authority) { a.MaxBudgetMicrocents = canon.MaxSafeInteger + 1 })},
		{"negative budget",
			auth(func(a *Authority) { a.MaxBudgetMicrocents = 0 }),
			auth(func(a *Authority) { a.MaxBudgetMicrocents = -1 })},
		{"negative chainDepth",
			auth(func(a *Authority) { a.ChainDepth = 0 }),
			auth(func(a *Authority) { a.ChainDepth = -1 })},
		{"negative maxChainDepth",
			auth(func(a *Authority) { a.MaxChainDepth = 0 }),
			auth(func(a *Authority) { a.MaxChainDepth = -1 })},
		{"maxChainDepth range",
			auth(func(a *Authority) { a.MaxChainDepth = canon.MaxSafeInteger }),
			auth(func(a *Authority) { a.MaxChainDepth = canon.MaxSafeInteger + 1 })},
		{"attenuation budget",
			at0(func(a *Attenuation) { a.MaxBudgetMicrocents = ptr[int64](0) }),
			at0(func(a *Attenuation) { a.MaxBudgetMicrocents = ptr[int64](-1) })},
		{"attenuation maxChainDepth",
			at0(func(a *Attenuation) { a.MaxChainDepth = ptr[int64](0) }),
			at0(func(a *Attenuation) { a.MaxChainDepth = ptr[int64](-1) })},
		{"attenuation maxChainDepth range",
			at0(func(a *Attenuation) { a.MaxChainDepth = ptr[int64](canon.MaxSafeInteger) }),
			at0(func(a *Attenuation) { a.MaxChainDepth = ptr[int64](canon.MaxSafeInteger + 1) })},
		{"expiresAt",
			auth(func(a *Authority) { a.ExpiresAt = "2026-01-01T01:00:00.123456789Z" }),
			auth(func(a *Authority) { a.ExpiresAt = "2026-01-01 01:00:00Z" })},
		{"expiresAt length",
			auth(func(a *Authority) { a.ExpiresAt = "2026-01-01T01:00:00." + strings.Repeat("0", 9) + "Z" }),
			auth(func(a *Authority) { a.ExpiresAt = "2026-01-01T01:00:00." + strings.Repeat("0", MaxStringLen) + "Z" })},
		{"issuedAt",
			auth(func(a *Authority) { a.IssuedAt = "2026-01-01T00:00:00+00:00" }),
			auth(func(a *Authority) { a.IssuedAt = "" })},
		{"attenuation expiresAt",
			at0(func(a *Attenuation) { a.ExpiresAt = ptr("2026-01-01T00:30:00Z") }),
			at0(func(a *Attenuation) { a.ExpiresAt = ptr("2026-13-01T00:30:00Z") })},
		{"issuer",
			auth(func(a *Authority) { a.Issuer = rootKey.ID() }),
			auth(func(a *Authority) { a.Issuer = rootKey.DID() })},
		{"delegatee",
			auth(func(a *Authority) { a.Delegatee = carolKey.ID() }),
			auth(func(a *Authority) { a.Delegatee = carolKey.ID()[:42] })},
		{"delegatee alphabet",
			auth(func(a *Authority) { a.Delegatee = carolKey.ID() }),
			auth(func(a *Authority) { a.Delegatee = carolKey.ID()[:42] + "=" })},
		{"attenuator",
			at0(func(a *Attenuation) { a.Delegatee = carolKey.ID() }),
			at0(func(a *Attenuation) { a.Attenuator = "alice" })},
		{"attenuation delegatee",
			at0(func(a *Attenuation) { a.Delegatee = carolKey.ID() }),
			at0(func(a *Attenuation) { a.Delegatee = carolKey.DID() })},
		{"format",
			auth(func(a *Authority) {}),
			func(tb testing.TB) string {
				st := SignedToken{Format: "delegateos-sjt-v1 ", Authority: baseAuthority(), Attenuations: []Attenuation{}}
				sign(tb, &st, rootKey)
				return serialize(tb, st)
			}},
	}
	// Signature fields, changed after signing.
	sigCase := func(name string, ok, bad func(*SignedToken)) limitCase {
		build := func(m func(*SignedToken)) func(testing.TB) string {
			return func(tb testing.TB) string {
				st := SignedToken{Format: Format, Authority: baseAuthority(), Attenuations: []Attenuation{a0}}
				sign(tb, &st, rootKey, aliceKey)
				m(&st)
				return serialize(tb, st)
			}
		}
		return limitCase{name, build(ok), build(bad)}
	}
	cases = append(cases,
		sigCase("signer", func(*SignedToken) {}, func(st *SignedToken) { st.Signatures[1].Signer = "" }),
		sigCase("signature length", func(*SignedToken) {}, func(st *SignedToken) { st.Signatures[1].Signature = st.Signatures[1].Signature[:84] }),
		sigCase("signature encoding", func(*SignedToken) {}, func(st *SignedToken) { st.Signatures[1].Signature += "==" }),
		sigCase("covers index", func(st *SignedToken) { st.Signatures[1].Covers = MaxAttenuations },
			func(st *SignedToken) { st.Signatures[1].Covers = MaxAttenuations + 1 }),
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			at, past := c.at(t), c.past(t)
			if _, err := Parse(at); err != nil {
				t.Fatalf("at the limit: %v", err)
			}
			_, err := mustVerifier(t, Options{}).Verify(at, readReq())
			if errors.Is(err, ErrMalformed) {
				t.Fatalf("at the limit: %v", err)
			}
			_, err = Parse(past)
			wantDenial(t, err, ErrMalformed)
			_, err = mustVerifier(t, Options{}).Verify(past, readReq())
			wantDenial(t, err, ErrMalformed)
		})
	}
	t.Run("long tokens are refused before decoding", func(t *testing.T) {
		_, err := Parse(strings.Repeat("A", MaxTokenLen+1))
		wantDenial(t, err, ErrMalformed)
		if !strings.Contains(err.Error(), "over the limit") {
			t.Errorf("%v", err)
		}
	})
	t.Run("covers written by hand", func(t *testing.T) {
		j := string(decodeJSON(t, longChain(t, 1, 0)))
		for _, covers := range []string{`-1`, `17`, `9007199254740993`, `"0"`, `true`, `null`, `"authority "`} {
			s := strings.Replace(j, `"covers":0`, `"covers":`+covers, 1)
			_, err := Parse(b64.Encode([]byte(s)))
			wantDenial(t, err, ErrMalformed)
		}
	})
}

// validate refuses on its own what the canonical comparison would also
// refuse, so a change to the encoder cannot quietly admit it.
func TestValidateDefenceInDepth(t *testing.T) {
	for name, edit := range map[string]func(*SignedToken){
		"nil authority capabilities":   func(st *SignedToken) { st.Authority.Capabilities = nil },
		"nil attenuation capabilities": func(st *SignedToken) { st.Attenuations[0].AllowedCapabilities = new([]Capability) },
	} {
		st := chain2(t).Unverified()
		edit(&st)
		tok := &Token{t: st}
		err := tok.validate()
		wantDenial(t, err, ErrMalformed)
		if !strings.Contains(err.Error(), "missing") {
			t.Errorf("%s: %v", name, err)
		}
	}
	_, err := Parse("")
	wantDenial(t, err, ErrMalformed)
	if !strings.Contains(err.Error(), "empty token") {
		t.Errorf("empty token: %v", err)
	}
}
