package ldp

import (
	"errors"
	"testing"
)

func TestCheckTrust(t *testing.T) {
	closed := TrustDomain{Name: "research.internal"}
	open := TrustDomain{Name: "research.internal", AllowCrossDomain: true, TrustedPeers: []string{"partner.corp"}}
	cases := []struct {
		name                string
		d                   TrustDomain
		initiator, required string
		code                string // "" accepted
	}{
		{"same domain", closed, "research.internal", "", ""},
		{"same domain, required matches", closed, "research.internal", "research.internal", ""},
		{"required mismatch (rule 1)", closed, "research.internal", "finance.internal", CodeTrustDomainMismatch},
		{"required mismatch beats trust", open, "partner.corp", "other", CodeTrustDomainMismatch},
		{"cross-domain refused (rule 2)", closed, "partner.corp", "", CodeCrossDomainRefused},
		{"trusted peer (rule 3)", open, "partner.corp", "", ""},
		{"trusted peer, required matches", open, "partner.corp", "research.internal", ""},
		{"untrusted peer (rule 3)", open, "stranger.org", "", CodeUntrustedPeer},
		{"no initiator domain, closed", closed, "", "", CodeCrossDomainRefused},
		{"no initiator domain, open", open, "", "", CodeUntrustedPeer},
		{"case matters", closed, "Research.Internal", "", CodeCrossDomainRefused},
	}
	for _, c := range cases {
		err := CheckTrust(c.d, c.initiator, c.required)
		var te *TrustError
		switch {
		case c.code == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.code != "" && (!errors.As(err, &te) || te.Code != c.code):
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
}
