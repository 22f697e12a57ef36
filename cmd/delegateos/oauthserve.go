package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/oauth"
	"github.com/delegateos/delegateos/receipt"
)

// The authorization server is an extension of delegateos serve: with
// --authorize it serves the OAuth endpoints beside the MCP endpoint and
// checks the tokens it issued on the way in.
func init() {
	var f oauthFlags
	var as *oauth.Server
	serveExtensions = append(serveExtensions, serveExtension{
		flags: f.declare,
		check: f.check,
		mount: func(s *serveSetup) error {
			var err error
			if as, err = f.build(s, s.Server.HostAllowed); err != nil || as == nil {
				return err
			}
			as.Mount(s.Server.Mux)
			// Every token the gate verifies, not only the Authorization
			// header's that Protect sees, is held to the same terms.
			s.Gate.Accept = as.AcceptToken
			return nil
		},
		wrap: func(h http.Handler) http.Handler {
			if as == nil {
				return h
			}
			return as.Protect(h)
		},
	})
}

type oauthFlags struct {
	authorize *bool
	grant     *string
	grantKey  *string
	password  *string
	clients   *[]string
}

func (f *oauthFlags) declare(fs *pflag.FlagSet) {
	f.authorize = fs.Bool("authorize", false, "serve an OAuth 2.1 authorization server (MCP authorization) that hands out attenuations of --grant to clients a person approves on its consent page; needs --grant, --grant-key and --consent-password, and TLS unless listening on loopback (see docs/oauth.md)")
	f.grant = fs.String("grant", "", "with --authorize: the token whose attenuations are handed out, as @FILE")
	f.grantKey = fs.String("grant-key", "", "with --authorize: the key file of --grant's delegatee, which signs the attenuations")
	f.password = fs.String("consent-password", "", "with --authorize: the consent page's sign-in password, as @FILE (at least 12 bytes)")
	f.clients = fs.StringArray("oauth-client", nil, "with --authorize: a client registered beforehand, as CLIENT_ID=REDIRECT_URI[,REDIRECT_URI...] (repeatable): for a client configured with a client ID instead of registering itself")
}

// check refuses flags that do not go together, before the audit log is
// opened.
func (f *oauthFlags) check(s *serveSetup) error {
	if !*f.authorize {
		if *f.grant != "" || *f.grantKey != "" || *f.password != "" || len(*f.clients) > 0 {
			return usagef("--grant, --grant-key, --consent-password and --oauth-client go with --authorize")
		}
		return nil
	}
	if *f.grant == "" || *f.grantKey == "" || *f.password == "" {
		return fixf("--authorize needs --grant @FILE, --grant-key FILE and --consent-password @FILE: e.g. delegateos serve --authorize --grant @grant.tok --grant-key gate.key --consent-password @consent.pw -- UPSTREAM")
	}
	if host, _, _ := net.SplitHostPort(s.Listen); !s.TLS && !isLoopback(host) {
		return fixf("--authorize without TLS on %s would send passwords, codes and tokens in the clear: give --tls-cert and --tls-key, or listen on a loopback address", s.Listen)
	}
	return nil
}

// build makes the authorization server, or returns nil without --authorize.
func (f *oauthFlags) build(s *serveSetup, hostAllowed func(string) bool) (*oauth.Server, error) {
	if !*f.authorize {
		return nil, nil
	}
	if !strings.HasPrefix(*f.grant, "@") || !strings.HasPrefix(*f.password, "@") {
		return nil, fixf("give --grant and --consent-password as @FILE (mode 0600), not on the command line where every local user can read them")
	}
	for _, p := range []string{(*f.grant)[1:], (*f.password)[1:]} {
		if err := checkTokenFile(p, nil, s.Log); err != nil {
			return nil, err
		}
	}
	grantText, err := readToken(&env{}, *f.grant)
	if err != nil {
		return nil, err
	}
	grant, err := dct.ParseInput(grantText)
	if err != nil {
		return nil, inputf("--grant %s: %v", *f.grant, err)
	}
	if s.Gate.Verifier == nil {
		return nil, fixf("--grant cannot be verified: no trusted roots; give --root or roots in the policy")
	}
	scope, err := s.Gate.Verifier.VerifyChain(grant.String(), time.Now())
	if err != nil {
		return nil, fixf("--grant is not valid here: %v; %s", err, tokenFix(err))
	}
	key, err := identity.LoadKeyFile(*f.grantKey)
	if err != nil {
		return nil, inputf("--grant-key %s: %v", *f.grantKey, err)
	}
	pw, err := os.ReadFile((*f.password)[1:])
	if err != nil {
		return nil, inputf("--consent-password %s: %v", *f.password, err)
	}
	var clients []oauth.Client
	for _, c := range *f.clients {
		id, uris, ok := strings.Cut(c, "=")
		if !ok {
			return nil, usagef("--oauth-client %q: give CLIENT_ID=REDIRECT_URI[,REDIRECT_URI...]", c)
		}
		clients = append(clients, oauth.Client{ID: id, Name: id, RedirectURIs: strings.Split(uris, ",")})
	}
	as, err := oauth.New(oauth.Config{
		Grant: grant, GrantKey: key, GrantScope: scope, ConsentPassword: strings.TrimRight(string(pw), "\r\n"),
		Endpoint: s.Endpoint, Live: s.CheckToken, Log: s.Log, Clients: clients, HostAllowed: hostAllowed,
		Record: func(tok *dct.Token, client string) error {
			// Verified with the roots in force (a reload may change them).
			return recordIssued(s, s.Gates.Load().Gate.Verifier, tok, grant.Blocks()+1, client)
		},
	})
	if err != nil {
		return nil, fixf("--authorize: %v", err)
	}
	s.Log.Info("authorization server on", zap.Strings("capabilities", capStrings(scope.Capabilities)), zap.Int64("budget", scope.RemainingBudgetMicrocents), zap.String("expires", scope.ExpiresAt))
	return as, nil
}

// recordIssued records a token the authorization server issues: its chain
// down to the consent delegation (its first upto blocks) in the
// workspace's delegation chain, and a decision receipt (method
// oauth/token, the client's name as the target, block IDs only) in the
// audit log. The access token's own link is not recorded: a record holds
// its delegation's token as the delegatee holds it, and an access token
// is a bearer credential whose holder key the server made, so the log
// would hand live tokens to whoever reads the workspace. (The consent
// delegation's token, recorded, is refused by this gate, which accepts
// only the tokens it issued.)
func recordIssued(s *serveSetup, v *dct.Verifier, tok *dct.Token, upto int, client string) error {
	now := time.Now()
	if d := s.Delegations; d != nil && d.Chain != nil {
		recs, err := chain.Records(tok, now)
		if err != nil {
			return err
		}
		if len(recs) > upto {
			recs = recs[:upto]
		}
		for _, rec := range recs {
			_, err := d.Chain.Get(rec.Key)
			if err == nil {
				continue
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			if err := d.Chain.Insert(rec); err != nil && !errors.Is(err, chain.ErrDuplicate) {
				return err
			}
		}
	}
	if ev := s.Evidence; ev != nil {
		if ev.Failed() {
			return errors.New("the audit log cannot be written")
		}
		if v == nil {
			return errors.New("the token issued cannot be verified: no trusted roots")
		}
		scope, err := v.VerifyChain(tok.String(), now)
		if err != nil {
			return fmt.Errorf("the token issued does not verify: %w", err)
		}
		ev.Decided(&receipt.Decision{Method: "oauth/token", Target: client, Token: tok.String(), Scope: scope, Allowed: true, Enforced: true, At: now})
	}
	return nil
}

func capStrings(caps []dct.Capability) []string {
	out := make([]string, len(caps))
	for i, c := range caps {
		out[i] = c.String()
	}
	return out
}
