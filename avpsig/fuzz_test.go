package avpsig

import (
	"strings"
	"testing"
	"time"
)

// FuzzParseHeader checks that any header that parses formats back to a
// header that parses to the same values.
func FuzzParseHeader(f *testing.F) {
	s, _ := Sign(testKey(1), "POST", "/mcp", "a=1", []byte("{}"), t0, nil)
	f.Add(s.Signature)
	f.Add(`AVP-Sig v="2",did="did:key:z",ts="0",nonce="",sig=""`)
	f.Add(`avp-sig  v="2" , did=""`)
	f.Fuzz(func(t *testing.T, v string) {
		h, err := ParseHeader(v)
		if err != nil {
			return
		}
		h2, err := ParseHeader(h.String())
		if err != nil {
			t.Fatalf("%q parsed, but its formatted form %q does not: %v", v, h.String(), err)
		}
		if h2.String() != h.String() {
			t.Fatalf("round trip changed %q to %q", h.String(), h2.String())
		}
	})
}

// FuzzParseCovered checks the AVP-Sig-Covered parser round-trips.
func FuzzParseCovered(f *testing.F) {
	s, _ := Sign(testKey(1), "POST", "/mcp", "a=1&b=%2F", []byte("{}"), t0, nil)
	f.Add(s.Covered)
	f.Add(`query="",body-sha256=""`)
	f.Fuzz(func(t *testing.T, v string) {
		c, err := ParseCovered(v)
		if err != nil {
			return
		}
		if c2, err := ParseCovered(c.String()); err != nil || c2 != c {
			t.Fatalf("round trip of %q: %+v, %v", v, c2, err)
		}
	})
}

// FuzzCanonicalQuery checks that a canonical query is a fixed point and
// holds only unreserved characters, escapes, "=" and "&".
func FuzzCanonicalQuery(f *testing.F) {
	for _, q := range []string{"b=hello+world&a=2&a=1&empty=", "a=%FF&&=;", "x=%2"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		c, err := CanonicalQuery(q)
		if err != nil {
			return
		}
		if strings.Trim(c, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~%=&") != "" {
			t.Fatalf("%q: canonical %q has other characters", q, c)
		}
		if again, err := CanonicalQuery(c); err != nil || again != c {
			t.Fatalf("%q: canonical %q is not a fixed point: %q, %v", q, c, again, err)
		}
	})
}

// FuzzVerify checks that no Authorization value makes Verify accept a
// request not signed by the holder, or panic.
func FuzzVerify(f *testing.F) {
	holder := testKey(1)
	s, _ := Sign(testKey(2), "POST", "/mcp", "", []byte("{}"), t0, nil)
	f.Add(s.Signature, s.Covered)
	f.Fuzz(func(t *testing.T, auth, covered string) {
		v := &Verifier{Now: func() time.Time { return t0 }}
		if err := v.VerifyParts("POST", "/mcp", "", []string{auth}, []string{covered}, []byte("{}"), did(holder)); err == nil {
			t.Fatalf("accepted %q", auth)
		}
	})
}
