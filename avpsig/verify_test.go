package avpsig

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/identity"
)

var t0 = time.Unix(1_800_000_000, 0)

func did(k ed25519.PrivateKey) string {
	return identity.DIDFromPublicKey(k.Public().(ed25519.PublicKey))
}

// signed is a request signed by key at t0 with the given nonce byte.
func signed(t *testing.T, key ed25519.PrivateKey, at time.Time, nonce byte, method, target, body string) *http.Request {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	s, err := Sign(key, method, r.URL.EscapedPath(), r.URL.RawQuery, []byte(body), at, fixedReader(bytes.Repeat([]byte{nonce}, 16)))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", s.Signature)
	r.Header.Set(CoveredHeader, s.Covered)
	return r
}

func reason(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return Reason(fmt.Sprint("not an *Error: ", err))
}

func TestVerifyReasons(t *testing.T) {
	holder, thief := testKey(1), testKey(2)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`
	retarget := func(r *http.Request, target string) *http.Request {
		n := httptest.NewRequest(r.Method, target, strings.NewReader(body))
		n.Header = r.Header
		return n
	}
	cases := []struct {
		name string
		req  func() *http.Request
		body string
		want Reason
	}{
		{"missing", func() *http.Request { return httptest.NewRequest("POST", "/mcp", nil) }, body, ReasonMissing},
		{"bearer instead", func() *http.Request {
			r := httptest.NewRequest("POST", "/mcp", nil)
			r.Header.Set("Authorization", "Bearer abc")
			return r
		}, body, ReasonMissing},
		{"in both headers", func() *http.Request {
			r := signed(t, holder, t0, 1, "POST", "/mcp", body)
			r.Header.Set(SignatureHeader, r.Header.Get("Authorization"))
			return r
		}, body, ReasonMalformed},
		{"two headers", func() *http.Request {
			r := signed(t, holder, t0, 1, "POST", "/mcp", body)
			r.Header.Add("Authorization", r.Header.Get("Authorization"))
			return r
		}, body, ReasonMalformed},
		{"v1", func() *http.Request {
			r := signed(t, holder, t0, 1, "POST", "/mcp", body)
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), `v="2",`, "", 1))
			return r
		}, body, ReasonMalformed},
		{"wrong key", func() *http.Request { return signed(t, thief, t0, 1, "POST", "/mcp", body) }, body, ReasonWrongKey},
		{"stale", func() *http.Request { return signed(t, holder, t0.Add(-61*time.Second), 1, "POST", "/mcp", body) }, body, ReasonStale},
		{"from the future", func() *http.Request { return signed(t, holder, t0.Add(61*time.Second), 1, "POST", "/mcp", body) }, body, ReasonStale},
		{"body tampered", func() *http.Request { return signed(t, holder, t0, 1, "POST", "/mcp", body) }, body + " ", ReasonBodyTampered},
		{"query tampered", func() *http.Request {
			return retarget(signed(t, holder, t0, 1, "POST", "/mcp?a=1", body), "/mcp?a=2")
		}, body, ReasonQueryTampered},
		{"query added", func() *http.Request {
			return retarget(signed(t, holder, t0, 1, "POST", "/mcp", body), "/mcp?admin=1")
		}, body, ReasonQueryTampered},
		{"path tampered", func() *http.Request {
			return retarget(signed(t, holder, t0, 1, "POST", "/mcp", body), "/admin")
		}, body, ReasonBadSignature},
		{"method tampered", func() *http.Request {
			r := signed(t, holder, t0, 1, "POST", "/mcp", body)
			r.Method = "PUT"
			return r
		}, body, ReasonBadSignature},
		{"body tampered, no covered header", func() *http.Request {
			r := signed(t, holder, t0, 1, "POST", "/mcp", body)
			r.Header.Del(CoveredHeader)
			return r
		}, body + " ", ReasonBadSignature},
		{"covered header lies", func() *http.Request {
			r := signed(t, holder, t0, 1, "POST", "/mcp", body)
			r.Header.Set(CoveredHeader, Covered{Query: "", BodySHA256: BodySHA256([]byte("x"))}.String())
			return r
		}, body + " ", ReasonBadSignature},
		{"bad query encoding", func() *http.Request {
			return retarget(signed(t, holder, t0, 1, "POST", "/mcp", body), "/mcp?a=%zz")
		}, body, ReasonMalformed},
		{"forged signature", func() *http.Request {
			r := signed(t, holder, t0, 1, "POST", "/mcp", body)
			a := r.Header.Get("Authorization")
			i := strings.Index(a, `sig="`) + 5
			flip := "0"
			if a[i] == '0' {
				flip = "1"
			}
			r.Header.Set("Authorization", a[:i]+flip+a[i+1:])
			r.Header.Del(CoveredHeader)
			return r
		}, body, ReasonBadSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := &Verifier{Now: func() time.Time { return t0 }}
			err := v.Verify(c.req(), []byte(c.body), did(holder))
			if got := reason(err); got != c.want {
				t.Fatalf("got %v, want %s", err, c.want)
			}
			if v.Nonces() != 0 {
				t.Fatalf("a refused request left %d nonces", v.Nonces())
			}
		})
	}
}

func TestVerifyAcceptsPrincipalIDAndSpendsNonce(t *testing.T) {
	holder := testKey(1)
	v := &Verifier{Now: func() time.Time { return t0 }}
	r := signed(t, holder, t0, 7, "POST", "/mcp?b=hello+world&a=1", "{}")
	if err := v.Verify(r, []byte("{}"), identity.PrincipalID(holder.Public().(ed25519.PublicKey))); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(r, []byte("{}"), did(holder)); reason(err) != ReasonReplayed {
		t.Fatalf("replay: got %v", err)
	}
	// Another nonce from the same key is fine.
	if err := v.Verify(signed(t, holder, t0, 8, "POST", "/mcp?a=1&b=hello%20world", "{}"), []byte("{}"), did(holder)); err != nil {
		t.Fatal(err)
	}
}

func TestReplayRefusedUntilStale(t *testing.T) {
	holder := testKey(1)
	now := t0
	v := &Verifier{Window: 10 * time.Second, Now: func() time.Time { return now }}
	r := signed(t, holder, t0, 1, "GET", "/mcp", "")
	if err := v.Verify(r, nil, did(holder)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{time.Second, 9 * time.Second, 10 * time.Second} {
		now = t0.Add(d)
		if err := v.Verify(r, nil, did(holder)); reason(err) != ReasonReplayed {
			t.Fatalf("at +%v: got %v, want replayed", d, err)
		}
	}
	now = t0.Add(11 * time.Second)
	if err := v.Verify(r, nil, did(holder)); reason(err) != ReasonStale {
		t.Fatalf("after the window: got %v, want stale", err)
	}
	// A later request makes the verifier forget the expired nonce.
	if err := v.Verify(signed(t, holder, now, 2, "GET", "/mcp", ""), nil, did(holder)); err != nil {
		t.Fatal(err)
	}
	if n := v.Nonces(); n != 1 {
		t.Fatalf("%d nonces held, want 1", n)
	}
}

func TestNonceMemoryBounded(t *testing.T) {
	holder := testKey(1)
	now := t0
	v := &Verifier{Window: 5 * time.Second, MaxNonces: 3, Now: func() time.Time { return now }}
	// Three signers without tokens: three trees, each within its share.
	for i := range 3 {
		k := testKey(byte(1 + i))
		if err := v.Verify(signed(t, k, now, byte(i), "GET", "/", ""), nil, did(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Verify(signed(t, holder, now, 9, "GET", "/", ""), nil, did(holder)); reason(err) != ReasonBusy {
		t.Fatalf("a fourth live nonce: got %v, want busy", err)
	}
	// Once the first three have left the window there is room again.
	now = t0.Add(6 * time.Second)
	if err := v.Verify(signed(t, holder, now, 9, "GET", "/", ""), nil, did(holder)); err != nil {
		t.Fatal(err)
	}
	if n := v.Nonces(); n != 1 {
		t.Fatalf("%d nonces held, want 1", n)
	}
}

func TestTransportSignsEveryRequest(t *testing.T) {
	holder := testKey(3)
	v := &Verifier{}
	var got []error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, v.Verify(r, body, did(holder)))
	}))
	defer srv.Close()
	c := &http.Client{Transport: &Transport{Key: holder}}
	for _, body := range []string{`{"a":1}`, ""} {
		req, _ := http.NewRequest("POST", srv.URL+"/mcp?x=a+b&y=%2F", strings.NewReader(body))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if req.Header.Get(SignatureHeader) != "" {
			t.Fatal("the caller's request was changed")
		}
	}
	resp, err := c.Get(srv.URL + "/path%2Fwith%20escapes")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(got) != 3 {
		t.Fatalf("%d requests reached the server", len(got))
	}
	for i, err := range got {
		if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
}

func TestParseHeaderRejects(t *testing.T) {
	sig := strings.Repeat("ab", 64)
	good := `AVP-Sig v="2",did="did:key:z6Mkha2Epo5LtXSbfqe4pr6isB3r8Hx86QfMwfiAfUbf8db5",ts="1800000000",nonce="0123456789abcdef0123456789abcdef",sig="` + sig + `"`
	if _, err := ParseHeader(good); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseHeader(strings.ReplaceAll(strings.Replace(good, "AVP-Sig", "avp-sig", 1), ",", " ,\t")); err != nil {
		t.Fatalf("case and spaces: %v", err)
	}
	for name, bad := range map[string]string{
		"scheme":        strings.Replace(good, "AVP-Sig", "AVP-Sign", 1),
		"no params":     "AVP-Sig",
		"version 3":     strings.Replace(good, `v="2"`, `v="3"`, 1),
		"unknown param": good + `,x="1"`,
		"duplicate":     good + `,ts="1800000000"`,
		"no did":        strings.Replace(good, `did="did:key:z6Mkha2Epo5LtXSbfqe4pr6isB3r8Hx86QfMwfiAfUbf8db5",`, "", 1),
		"did:web":       strings.Replace(good, "did:key:", "did:web:", 1),
		"negative ts":   strings.Replace(good, `ts="1800000000"`, `ts="-1"`, 1),
		"leading zero":  strings.Replace(good, `ts="1800000000"`, `ts="01800000000"`, 1),
		"huge ts":       strings.Replace(good, `ts="1800000000"`, `ts="1800000000000"`, 1),
		"upper nonce":   strings.Replace(good, "abcdef0123", "ABCDEF0123", 1),
		"short nonce":   strings.Replace(good, `0123456789abcdef0123456789abcdef`, `0123`, 1),
		"short sig":     strings.Replace(good, sig, sig[:126], 1),
		"non-hex sig":   strings.Replace(good, sig, "zz"+sig[2:], 1),
		"unquoted":      strings.Replace(good, `v="2"`, `v=2`, 1),
		"escape":        strings.Replace(good, `v="2"`, `v="\2"`, 1),
		"unterminated":  good[:len(good)-1],
		"trailing":      good + ",",
		"no comma":      strings.Replace(good, `",did`, `" did`, 1),
		"oversized":     good + strings.Repeat(" ", MaxHeaderLen),
	} {
		if h, err := ParseHeader(bad); err == nil {
			t.Errorf("%s: accepted %+v", name, h)
		}
	}
}

func TestSignatureBesideBearer(t *testing.T) {
	holder := testKey(1)
	r := signed(t, holder, t0, 1, "POST", "/mcp", "{}")
	r.Header.Set(SignatureHeader, r.Header.Get("Authorization"))
	r.Header.Set("Authorization", "Bearer some-token")
	v := &Verifier{Now: func() time.Time { return t0 }}
	if err := v.Verify(r, []byte("{}"), did(holder)); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyFromAnotherHeader(t *testing.T) {
	holder := testKey(1)
	r := signed(t, holder, t0, 1, "POST", "/mcp", "{}")
	r.Header.Set("Signature", r.Header.Get("Authorization"))
	r.Header.Set("Authorization", "Bearer some-token")
	v := &Verifier{Now: func() time.Time { return t0 }, Header: "Signature"}
	if err := v.Verify(r, []byte("{}"), did(holder)); err != nil {
		t.Fatal(err)
	}
	r.Header.Del("Signature")
	if err := v.Verify(r, []byte("{}"), did(holder)); reason(err) != ReasonMissing {
		t.Fatalf("got %v", err)
	}
}

// One signer cannot take the whole nonce memory: a holder of any token the
// gate takes, however little it grants, would otherwise have every other
// signer refused as busy for as long as it keeps its nonces live.
func TestOneSignerCannotFillNonceMemory(t *testing.T) {
	greedy, other := testKey(5), testKey(6)
	v := &Verifier{Now: func() (t time.Time) { return t0 }}
	var n [16]byte
	refused := false
	for i := range DefaultMaxNonces {
		binary.BigEndian.PutUint64(n[:], uint64(i)+1)
		s, err := Sign(greedy, "POST", "/mcp", "", nil, t0, fixedReader(n[:]))
		if err != nil {
			t.Fatal(err)
		}
		if err := v.VerifyParts("POST", "/mcp", "", []string{s.Signature}, nil, nil, did(greedy)); err != nil {
			if reason(err) != ReasonBusy {
				t.Fatal(err)
			}
			refused = true
			break
		}
	}
	if !refused {
		t.Fatalf("one signer holds all %d nonces", v.Nonces())
	}
	if err := v.Verify(signed(t, other, t0, 1, "GET", "/", ""), nil, did(other)); err != nil {
		t.Fatalf("another signer, once one has spent %d nonces: %v", v.Nonces(), err)
	}
}
