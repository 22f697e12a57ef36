package oauth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/b64"
)

func edProof(t testing.TB, priv ed25519.PrivateKey, claims map[string]any, hdr map[string]any) string {
	pub := priv.Public().(ed25519.PublicKey)
	h := map[string]any{"typ": "dpop+jwt", "alg": "EdDSA", "jwk": map[string]string{"kty": "OKP", "crv": "Ed25519", "x": b64.Encode(pub)}}
	for k, v := range hdr {
		h[k] = v
	}
	hb, _ := json.Marshal(h)
	cb, _ := json.Marshal(claims)
	signing := b64.Encode(hb) + "." + b64.Encode(cb)
	return signing + "." + b64.Encode(ed25519.Sign(priv, []byte(signing)))
}

func TestDPoPParse(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Now()
	good := map[string]any{"jti": "j1", "htm": "POST", "htu": "http://127.0.0.1:8080/mcp", "iat": now.Unix(), "ath": TokenHash("tok")}
	p, err := ParseDPoP(edProof(t, priv, good, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(DPoPCheck{Method: "POST", URL: "HTTP://127.0.0.1:8080/mcp", AccessToken: "tok", Now: now}); err != nil {
		t.Fatalf("a good proof: %v", err)
	}
	if p.Ed25519 == nil || len(p.JKT) != 43 {
		t.Fatalf("proof %+v", p)
	}
	for name, c := range map[string]struct {
		claims, hdr map[string]any
		want        string
	}{
		"typ jwt":         {good, map[string]any{"typ": "JWT"}, "typ"},
		"alg none":        {good, map[string]any{"alg": "none"}, "alg"},
		"alg HS256":       {good, map[string]any{"alg": "HS256"}, "alg"},
		"a private key":   {good, map[string]any{"jwk": map[string]string{"kty": "OKP", "crv": "Ed25519", "x": b64.Encode(priv.Public().(ed25519.PublicKey)), "d": "AAAA"}}, "private"},
		"no jti":          {map[string]any{"htm": "POST", "htu": "http://x/mcp", "iat": now.Unix()}, nil, "jti"},
		"iat not integer": {map[string]any{"jti": "j", "htm": "POST", "htu": "http://x/mcp", "iat": "now"}, nil, "iat"},
	} {
		if _, err := ParseDPoP(edProof(t, priv, c.claims, c.hdr)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error about %s", name, err, c.want)
		}
	}
	cache := newJTICache(2)
	if err := cache.use(p, now); err != nil {
		t.Fatal(err)
	}
	if err := cache.use(p, now); err != ErrDPoPReplayed {
		t.Fatalf("a replay: %v", err)
	}
}

// BenchmarkDPoPVerify is the per-request cost of checking a DPoP proof
// (ES256 is what clients send; EdDSA for comparison).
func BenchmarkDPoPVerify(b *testing.B) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Now()
	proof := edProof(b, priv, map[string]any{"jti": "j1", "htm": "POST", "htu": "http://127.0.0.1:8080/mcp", "iat": now.Unix(), "ath": TokenHash("tok")}, nil)
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pub, _ := ek.PublicKey.Bytes()
	hb, _ := json.Marshal(map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": map[string]string{"kty": "EC", "crv": "P-256", "x": b64.Encode(pub[1:33]), "y": b64.Encode(pub[33:])}})
	cb, _ := json.Marshal(map[string]any{"jti": "j1", "htm": "POST", "htu": "http://127.0.0.1:8080/mcp", "iat": now.Unix(), "ath": TokenHash("tok")})
	signing := b64.Encode(hb) + "." + b64.Encode(cb)
	d := sha256.Sum256([]byte(signing))
	r, s, _ := ecdsa.Sign(rand.Reader, ek, d[:])
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	es := signing + "." + b64.Encode(sig)
	b.Run("ES256", func(b *testing.B) {
		for b.Loop() {
			p, err := ParseDPoP(es)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Check(DPoPCheck{Method: "POST", URL: "http://127.0.0.1:8080/mcp", AccessToken: "tok", Now: now}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("EdDSA", func(b *testing.B) {
		for b.Loop() {
			p, err := ParseDPoP(proof)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Check(DPoPCheck{Method: "POST", URL: "http://127.0.0.1:8080/mcp", AccessToken: "tok", Now: now}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkProtectBearer is what Protect adds to a request with a Bearer
// token: one this server issued (a hash and a map lookup), and any other
// (parsed, to see whether it comes from the grant).
func BenchmarkProtectBearer(b *testing.B) {
	s, issued, other := benchServer(b)
	for name, tok := range map[string]string{"issued": issued, "other": other} {
		b.Run(name, func(b *testing.B) {
			r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
			for b.Loop() {
				r.Header.Set("Authorization", "Bearer "+tok)
				if e := s.checkResource(r); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
}
