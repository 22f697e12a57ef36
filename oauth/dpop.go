package oauth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"time"

	"github.com/delegateos/delegateos/internal/b64"
)

// HeaderDPoP is the request header that carries a DPoP proof.
const HeaderDPoP = "DPoP"

// DPoPAlgs are the proof signature algorithms accepted (also published as
// dpop_signing_alg_values_supported).
var DPoPAlgs = []string{"ES256", "EdDSA"}

// Proof is a DPoP proof (RFC 9449 §4.2) whose signature checked out
// against the key it carries; its claims are not checked yet (Check).
type Proof struct {
	// JKT is the JWK SHA-256 thumbprint (RFC 7638) of the proof's key.
	JKT string
	// Ed25519 is the proof's key when it is an Ed25519 one (nil else).
	Ed25519 ed25519.PublicKey

	JTI      string
	Method   string
	URL      string
	IssuedAt time.Time
	// ATH is the base64url SHA-256 of the access token, "" if absent.
	ATH string
}

// Errors of a DPoP proof.
var (
	ErrDPoPMalformed = errors.New("malformed DPoP proof")
	ErrDPoPSignature = errors.New("DPoP proof signature does not verify")
	ErrDPoPClaims    = errors.New("DPoP proof does not match the request")
	ErrDPoPReplayed  = errors.New("DPoP proof was used before")
)

type dpopHeader struct {
	Typ string          `json:"typ"`
	Alg string          `json:"alg"`
	JWK json.RawMessage `json:"jwk"`
}

type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
	D   string `json:"d"`
}

type dpopClaims struct {
	JTI string          `json:"jti"`
	HTM string          `json:"htm"`
	HTU string          `json:"htu"`
	IAT json.RawMessage `json:"iat"`
	ATH string          `json:"ath"`
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrDPoPMalformed, fmt.Sprintf(format, args...))
}

// ParseDPoP reads a compact JWS DPoP proof and checks its signature with
// the public key in its own header.
func ParseDPoP(s string) (*Proof, error) {
	if len(s) > MaxDPoPBytes {
		return nil, malformed("longer than %d bytes", MaxDPoPBytes)
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return nil, malformed("not a compact JWS (three dot-separated parts)")
	}
	hb, err := b64.Decode(parts[0])
	if err != nil {
		return nil, malformed("header: %v", err)
	}
	var h dpopHeader
	if err := strictJSON(hb, &h); err != nil {
		return nil, malformed("header: %v", err)
	}
	if h.Typ != "dpop+jwt" {
		return nil, malformed("typ is %q, not dpop+jwt", h.Typ)
	}
	var k jwk
	if err := strictJSON(h.JWK, &k); err != nil {
		return nil, malformed("jwk: %v", err)
	}
	if k.D != "" {
		return nil, malformed("the jwk holds a private key")
	}
	sig, err := b64.Decode(parts[2])
	if err != nil {
		return nil, malformed("signature: %v", err)
	}
	signed := []byte(s[:len(parts[0])+1+len(parts[1])])
	p := &Proof{}
	switch {
	case h.Alg == "ES256" && k.Kty == "EC" && k.Crv == "P-256":
		pub, err := p256Key(k.X, k.Y)
		if err != nil {
			return nil, malformed("jwk: %v", err)
		}
		digest := sha256.Sum256(signed)
		if len(sig) != 64 || !ecdsa.Verify(pub, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
			return nil, ErrDPoPSignature
		}
		p.JKT = thumbprint(`{"crv":"P-256","kty":"EC","x":"` + k.X + `","y":"` + k.Y + `"}`)
	case h.Alg == "EdDSA" && k.Kty == "OKP" && k.Crv == "Ed25519":
		x, err := b64.Decode(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, malformed("jwk: x is not an Ed25519 public key")
		}
		if len(sig) != ed25519.SignatureSize || !ed25519.Verify(x, signed, sig) {
			return nil, ErrDPoPSignature
		}
		p.JKT = thumbprint(`{"crv":"Ed25519","kty":"OKP","x":"` + k.X + `"}`)
		p.Ed25519 = ed25519.PublicKey(x)
	default:
		return nil, malformed("alg %q with a %q/%q key: use ES256 (P-256) or EdDSA (Ed25519)", h.Alg, k.Kty, k.Crv)
	}
	cb, err := b64.Decode(parts[1])
	if err != nil {
		return nil, malformed("claims: %v", err)
	}
	var c dpopClaims
	if err := strictJSON(cb, &c); err != nil {
		return nil, malformed("claims: %v", err)
	}
	if c.JTI == "" || len(c.JTI) > 256 || c.HTM == "" || c.HTU == "" {
		return nil, malformed("jti, htm and htu are required (jti at most 256 bytes)")
	}
	var iat int64
	if err := json.Unmarshal(c.IAT, &iat); err != nil {
		return nil, malformed("iat is not an integer")
	}
	p.JTI, p.Method, p.URL, p.IssuedAt, p.ATH = c.JTI, c.HTM, c.HTU, time.Unix(iat, 0), c.ATH
	return p, nil
}

// p256Key reads a P-256 public key from its JWK coordinates, refusing a
// point that is not on the curve.
func p256Key(x, y string) (*ecdsa.PublicKey, error) {
	xb, err1 := b64.Decode(x)
	yb, err2 := b64.Decode(y)
	if err1 != nil || err2 != nil || len(xb) != 32 || len(yb) != 32 {
		return nil, errors.New("x and y must be 32-byte base64url values")
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, xb...), yb...))
	if err != nil {
		return nil, errors.New("not a point on P-256")
	}
	return pub, nil
}

func thumbprint(canonical string) string {
	d := sha256.Sum256([]byte(canonical))
	return b64.Encode(d[:])
}

// TokenHash is the ath of an access token: base64url(SHA-256(token)).
func TokenHash(token string) string {
	d := sha256.Sum256([]byte(token))
	return b64.Encode(d[:])
}

// strictJSON decodes one JSON object with no trailing data and no member
// given twice (two readers of one proof must not see two proofs).
func strictJSON(b []byte, v any) error {
	if err := noDuplicateMembers(b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// noDuplicateMembers refuses an object (at the top level) that names a
// member twice.
func noDuplicateMembers(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return errors.New("not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := t.(string)
		if seen[name] {
			return fmt.Errorf("member %q given twice", name)
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}

// DPoPCheck is what a proof must match.
type DPoPCheck struct {
	// Method and URL are the request's (URL without query or fragment).
	Method, URL string
	// AccessToken is the token the request presents; "" for the token
	// endpoint, where a proof must not carry ath.
	AccessToken string
	Now         time.Time
}

// Check checks the proof's claims against the request: htm, htu, iat
// within DPoPWindow, and ath.
func (p *Proof) Check(want DPoPCheck) error {
	if p.Method != want.Method {
		return fmt.Errorf("%w: htm is %q, the request is a %s", ErrDPoPClaims, p.Method, want.Method)
	}
	if !sameURL(p.URL, want.URL) {
		return fmt.Errorf("%w: htu is %q, the request is to %s", ErrDPoPClaims, p.URL, want.URL)
	}
	if d := want.Now.Sub(p.IssuedAt); d > DPoPWindow || d < -DPoPWindow {
		return fmt.Errorf("%w: iat is %s, more than %s from the server's clock", ErrDPoPClaims, p.IssuedAt.UTC().Format(time.RFC3339), DPoPWindow)
	}
	switch {
	case want.AccessToken == "" && p.ATH != "":
		return fmt.Errorf("%w: ath is set on a proof for the token endpoint", ErrDPoPClaims)
	case want.AccessToken != "" && p.ATH != TokenHash(want.AccessToken):
		return fmt.Errorf("%w: ath is not the hash of the access token presented", ErrDPoPClaims)
	}
	return nil
}

// sameURL compares an htu with the request's URL, ignoring the query and
// fragment of the htu and the case of its scheme and host (RFC 9449 §4.3).
func sameURL(htu, want string) bool {
	if i := strings.IndexAny(htu, "?#"); i >= 0 {
		htu = htu[:i]
	}
	hs, hr, ok1 := strings.Cut(htu, "://")
	ws, wr, ok2 := strings.Cut(want, "://")
	if !ok1 || !ok2 || !strings.EqualFold(hs, ws) {
		return false
	}
	hh, hp, _ := strings.Cut(hr, "/")
	wh, wp, _ := strings.Cut(wr, "/")
	return strings.EqualFold(hh, wh) && hp == wp
}

// jtiCache remembers the proof IDs seen within the window, per key, so a
// captured proof cannot be sent again. It is bounded: when full of IDs
// still inside the window, proofs are refused (fail closed).
type jtiCache struct {
	mu   sync.Mutex
	seen map[string]time.Time // jkt + " " + jti -> when it leaves the window
	max  int
}

func newJTICache(max int) *jtiCache { return &jtiCache{seen: map[string]time.Time{}, max: max} }

// use records the proof's ID, or refuses it when it was seen before.
func (c *jtiCache) use(p *Proof, now time.Time) error {
	key := p.JKT + " " + p.JTI
	c.mu.Lock()
	defer c.mu.Unlock()
	if until, ok := c.seen[key]; ok && now.Before(until) {
		return ErrDPoPReplayed
	}
	if len(c.seen) >= c.max {
		for k, until := range c.seen {
			if !now.Before(until) {
				delete(c.seen, k)
			}
		}
		if len(c.seen) >= c.max {
			return errors.New("too many DPoP proofs within the window: try again shortly")
		}
	}
	// A proof is good until iat + window; remember it until then, and at
	// least a window from now (a proof dated ahead).
	c.seen[key] = maxTime(p.IssuedAt.Add(DPoPWindow), now.Add(DPoPWindow))
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
