package oauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Registration is the client metadata of a dynamic registration (RFC 7591
// §2) this server reads; other members are ignored, as §3.1 asks.
type Registration struct {
	RedirectURIs            []string `json:"redirect_uris"`
	ClientName              string   `json:"client_name,omitempty"`
	GrantTypes              []string `json:"grant_types,omitempty"`
	ResponseTypes           []string `json:"response_types,omitempty"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty"`
	Scope                   string   `json:"scope,omitempty"`
}

// ParseRegistration reads and checks a registration request's body: at
// least one redirect URI (https, or http on a loopback host, no fragment,
// at most MaxRedirectURIs of MaxURIBytes), a printable name, only the
// authorization_code and refresh_token grants, only the code response
// type, and no client authentication (a public client using PKCE). A
// refusal is an *Error with invalid_redirect_uri or
// invalid_client_metadata.
func ParseRegistration(body []byte) (*Registration, error) {
	if len(body) > MaxRegistrationBytes {
		return nil, badRequest(ErrInvalidClientMeta, fmt.Sprintf("the registration is larger than %d bytes", MaxRegistrationBytes))
	}
	if err := noDuplicateMembers(body); err != nil {
		return nil, badRequest(ErrInvalidClientMeta, "the registration is not a JSON object with each member once: "+err.Error())
	}
	var r Registration
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, badRequest(ErrInvalidClientMeta, "the registration cannot be read: "+err.Error())
	}
	if len(r.RedirectURIs) == 0 || len(r.RedirectURIs) > MaxRedirectURIs {
		return nil, badRequest(ErrInvalidRedirectURI, fmt.Sprintf("give 1 to %d redirect_uris", MaxRedirectURIs))
	}
	for _, u := range r.RedirectURIs {
		if err := checkRedirectURI(u); err != nil {
			return nil, badRequest(ErrInvalidRedirectURI, err.Error())
		}
	}
	if len(r.ClientName) > MaxClientNameBytes || !printable(r.ClientName) {
		return nil, badRequest(ErrInvalidClientMeta, fmt.Sprintf("client_name must be printable text of at most %d bytes", MaxClientNameBytes))
	}
	if r.GrantTypes == nil {
		r.GrantTypes = []string{"authorization_code"}
	}
	for _, g := range r.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return nil, badRequest(ErrInvalidClientMeta, fmt.Sprintf("grant type %q is not offered: use authorization_code and refresh_token", clip(g)))
		}
	}
	if r.ResponseTypes == nil {
		r.ResponseTypes = []string{"code"}
	}
	for _, t := range r.ResponseTypes {
		if t != "code" {
			return nil, badRequest(ErrInvalidClientMeta, fmt.Sprintf("response type %q is not offered: use code", clip(t)))
		}
	}
	if r.TokenEndpointAuthMethod == "" {
		r.TokenEndpointAuthMethod = "none"
	}
	if r.TokenEndpointAuthMethod != "none" {
		return nil, badRequest(ErrInvalidClientMeta, fmt.Sprintf("token_endpoint_auth_method %q is not offered: clients are public and use PKCE (none)", clip(r.TokenEndpointAuthMethod)))
	}
	if len(r.Scope) > MaxURIBytes {
		return nil, badRequest(ErrInvalidClientMeta, "scope is too long")
	}
	return &r, nil
}

// checkRedirectURI accepts an absolute https URI, or an http one on a
// loopback host (a native client's, RFC 8252 §7.3), without a fragment
// or user information.
func checkRedirectURI(s string) error {
	if len(s) > MaxURIBytes {
		return fmt.Errorf("a redirect URI is longer than %d bytes", MaxURIBytes)
	}
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("redirect URI %q is not an absolute http(s) URI", clip(s))
	}
	if u.Fragment != "" || strings.Contains(s, "#") {
		return fmt.Errorf("redirect URI %q has a fragment", clip(s))
	}
	if u.User != nil {
		return fmt.Errorf("redirect URI %q has user information", clip(s))
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if loopbackHost(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("redirect URI %q: http is allowed on a loopback host only; use https", clip(s))
	}
	return fmt.Errorf("redirect URI %q: the scheme must be https (or http on a loopback host)", clip(s))
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}

// client is a registered client.
type client struct {
	ID         string
	Reg        Registration
	Registered time.Time
	approved   bool
}

// clients holds the registered clients, bounded: anyone may register, so
// unapproved clients are forgotten oldest first beyond MaxUnapprovedClients,
// and a registration beyond MaxClients forgets the oldest unapproved one or
// is refused.
type clients struct {
	mu    sync.Mutex
	byID  map[string]*client
	order []string // registration order
}

func newClients() *clients { return &clients{byID: map[string]*client{}} }

var errTooManyClients = errors.New("too many registered clients")

func (cs *clients) add(c *client) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	unapproved := 0
	for _, id := range cs.order {
		if !cs.byID[id].approved {
			unapproved++
		}
	}
	if unapproved >= MaxUnapprovedClients || len(cs.order) >= MaxClients {
		i := slices.IndexFunc(cs.order, func(id string) bool { return !cs.byID[id].approved })
		if i < 0 {
			return errTooManyClients
		}
		delete(cs.byID, cs.order[i])
		cs.order = slices.Delete(cs.order, i, i+1)
	}
	cs.byID[c.ID] = c
	cs.order = append(cs.order, c.ID)
	return nil
}

func (cs *clients) get(id string) *client {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.byID[id]
}

func (cs *clients) approve(id string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c := cs.byID[id]; c != nil {
		c.approved = true
	}
}
