package oauth

import (
	"testing"
	"time"
)

// FuzzParseDPoP: any bytes are parsed without a panic, and a proof that
// parses has a thumbprint and claims that Check can read.
func FuzzParseDPoP(f *testing.F) {
	f.Add("eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7Imt0eSI6IkVDIiwiY3J2IjoiUC0yNTYiLCJ4IjoiIiwieSI6IiJ9fQ.e30.AA")
	f.Add("a.b.c")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseDPoP(s)
		if err != nil {
			return
		}
		if p.JKT == "" {
			t.Fatalf("a proof parsed without a key thumbprint: %q", s)
		}
		_ = p.Check(DPoPCheck{Method: "POST", URL: "http://127.0.0.1/mcp", Now: time.Now()})
	})
}

// FuzzParseRegistration: any body is read without a panic, and one that
// is accepted holds only what the server offers.
func FuzzParseRegistration(f *testing.F) {
	f.Add([]byte(`{"redirect_uris":["http://127.0.0.1:3000/cb"],"client_name":"x","token_endpoint_auth_method":"none"}`))
	f.Add([]byte(`{"redirect_uris":["https://a.example/cb"],"grant_types":["refresh_token"]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRegistration(b)
		if err != nil {
			return
		}
		if len(r.RedirectURIs) == 0 || r.TokenEndpointAuthMethod != "none" {
			t.Fatalf("accepted %q as %+v", b, r)
		}
		for _, u := range r.RedirectURIs {
			if checkRedirectURI(u) != nil {
				t.Fatalf("accepted redirect URI %q", u)
			}
		}
	})
}

// FuzzParseForm: any body is read without a panic; a form that is
// accepted gives each parameter but cap once.
func FuzzParseForm(f *testing.F) {
	f.Add([]byte("grant_type=authorization_code&code=x&cap=0&cap=1"))
	f.Add([]byte("a=1&a=2"))
	f.Add([]byte("%zz"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseForm(b)
		if err != nil {
			return
		}
		for k, vs := range v {
			if len(vs) > 1 && k != "cap" {
				t.Fatalf("%q accepted with %s twice", b, k)
			}
		}
	})
}
