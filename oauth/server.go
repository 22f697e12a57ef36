package oauth

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/timestamp"
)

// Config configures a Server.
type Config struct {
	// Grant is the token the server hands out attenuations of, and
	// GrantKey the key of its delegatee. Required.
	Grant    *dct.Token
	GrantKey *identity.Keypair
	// GrantScope is what Grant authorizes, as a verifier found it (its
	// capabilities, budget and expiry bound what a consent can approve).
	// Required.
	GrantScope *dct.AuthorizedScope
	// ConsentPassword is what the consent page's sign-in takes; at least
	// MinPasswordBytes. Required.
	ConsentPassword string
	// Endpoint is the MCP endpoint's path (the protected resource); ""
	// means "/mcp".
	Endpoint string
	// Record, when set, records an issued access token (its chain: the
	// consent delegation and the token's own) in the delegation chain and
	// the audit log; an error refuses the token (nothing unrecorded is
	// handed out). client names the client it is issued to.
	Record func(tok *dct.Token, client string) error
	// Live, when set, reports whether a token still authorizes anything
	// (not revoked, its delegation not ended): a refresh of a consent
	// delegation that is not live is refused and ends its refresh tokens.
	Live func(token string) error
	// Clients are registered beforehand (a client configured with a
	// client ID, as a remote connector or the Inspector may be): they are
	// never forgotten.
	Clients []Client
	// HostAllowed, when set, says whether a request's Host is one the
	// server answers for: the issuer and every URL the server gives out
	// are made from it, so a request naming another (DNS rebinding) is
	// refused. Nil allows any.
	HostAllowed func(host string) bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives what the server decides; nil discards.
	Log *zap.Logger
}

// Server is the authorization server. Mount its handlers on a mux, and
// wrap the MCP endpoint's handler with Protect.
type Server struct {
	cfg         Config
	log         *zap.Logger
	grantBlocks int
	grantBudget int64
	grantExpiry time.Time
	scopes      []string // the grant's capabilities that are scope tokens

	clients *clients
	jtis    *jtiCache
	lock    lockout

	mu       sync.Mutex
	pending  map[string]*pendingReq
	porder   []string
	codes    map[string]*authCode
	families map[string]*family
	refresh  map[string]*refreshEntry // by TokenHash of the refresh token
	issued   map[string]*issuedToken  // by TokenHash of the access token
}

// New checks cfg and returns a server.
func New(cfg Config) (*Server, error) {
	if cfg.Grant == nil || cfg.GrantKey == nil || cfg.GrantScope == nil {
		return nil, errors.New("oauth: a grant, its key and its scope are required")
	}
	if cfg.GrantKey.ID() != cfg.Grant.Delegatee() {
		return nil, fmt.Errorf("the grant key %s is not the grant's delegatee %s", cfg.GrantKey.DID(), cfg.Grant.Delegatee())
	}
	if len(cfg.ConsentPassword) < MinPasswordBytes {
		return nil, fmt.Errorf("the consent password is shorter than %d bytes", MinPasswordBytes)
	}
	if left := cfg.GrantScope.MaxChainDepth - cfg.GrantScope.ChainDepth; left < 2 {
		return nil, fmt.Errorf("the grant allows %d further delegations; the authorization server needs 2 (the consent, and each access token under it): mint it with a larger max chain depth", left)
	}
	exp, err := time.Parse(time.RFC3339Nano, cfg.GrantScope.ExpiresAt)
	if err != nil {
		return nil, fmt.Errorf("the grant's expiry %q: %v", cfg.GrantScope.ExpiresAt, err)
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "/mcp"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	s := &Server{
		cfg: cfg, log: log, grantBlocks: cfg.Grant.Blocks(), grantBudget: cfg.GrantScope.RemainingBudgetMicrocents, grantExpiry: exp,
		clients: newClients(), jtis: newJTICache(MaxDPoPJTIs),
		pending: map[string]*pendingReq{}, codes: map[string]*authCode{}, families: map[string]*family{},
		refresh: map[string]*refreshEntry{}, issued: map[string]*issuedToken{},
	}
	for _, c := range cfg.Clients {
		if !clientID.MatchString(c.ID) {
			return nil, fmt.Errorf("client ID %q: use 1 to 64 letters, digits, '.', '_' or '-'", clip(c.ID))
		}
		if len(c.RedirectURIs) == 0 || len(c.RedirectURIs) > MaxRedirectURIs {
			return nil, fmt.Errorf("client %s: give 1 to %d redirect URIs", c.ID, MaxRedirectURIs)
		}
		for _, u := range c.RedirectURIs {
			if err := checkRedirectURI(u); err != nil {
				return nil, fmt.Errorf("client %s: %v", c.ID, err)
			}
		}
		if s.clients.get(c.ID) != nil {
			return nil, fmt.Errorf("client %s is given twice", c.ID)
		}
		s.clients.byID[c.ID] = &client{ID: c.ID, Reg: Registration{RedirectURIs: c.RedirectURIs, ClientName: c.Name,
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"}, TokenEndpointAuthMethod: "none"}, approved: true}
		s.clients.order = append(s.clients.order, c.ID)
	}
	for _, c := range cfg.GrantScope.Capabilities {
		if scopeToken(c.String()) {
			s.scopes = append(s.scopes, c.String())
		}
	}
	return s, nil
}

// Client is a client registered beforehand: a public client (PKCE, no
// secret) with its redirect URIs.
type Client struct {
	ID, Name     string
	RedirectURIs []string
}

var clientID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Paths the server serves.
const (
	PathResourceMetadata = "/.well-known/oauth-protected-resource"
	PathServerMetadata   = "/.well-known/oauth-authorization-server"
	PathAuthorize        = "/authorize"
	PathToken            = "/token"
	PathRegister         = "/register"
)

// Mount registers the server's handlers on mux.
func (s *Server) Mount(mux *http.ServeMux) {
	mux.Handle(PathResourceMetadata, s.hostChecked(s.serveResourceMetadata))
	mux.Handle(PathResourceMetadata+s.cfg.Endpoint, s.hostChecked(s.serveResourceMetadata))
	mux.Handle(PathServerMetadata, s.hostChecked(s.serveServerMetadata))
	mux.Handle(PathServerMetadata+s.cfg.Endpoint, s.hostChecked(s.serveServerMetadata))
	mux.Handle(PathRegister, s.hostChecked(s.serveRegister))
	mux.Handle(PathAuthorize, s.hostChecked(s.serveAuthorize))
	mux.Handle(PathToken, s.hostChecked(s.serveToken))
}

func (s *Server) hostChecked(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.HostAllowed != nil && !s.cfg.HostAllowed(r.Host) {
			if r.ContentLength != 0 {
				w.Header().Set("Connection", "close")
			}
			oerr(http.StatusForbidden, ErrInvalidRequest, "the Host header names a host this server does not answer for").write(w)
			return
		}
		h(w, r)
	})
}

// issuer is the server's issuer identifier as the client reached it: the
// scheme and the Host the request names (serve checks Host).
func issuer(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func (s *Server) resource(r *http.Request) string { return issuer(r) + s.cfg.Endpoint }

func (s *Server) resourceMetadataURL(r *http.Request) string {
	return issuer(r) + PathResourceMetadata + s.cfg.Endpoint
}

// scopeToken reports whether s can be an OAuth scope token (RFC 6749
// §3.3): printable ASCII but space, " and \.
func scopeToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func allowCORS(w http.ResponseWriter, r *http.Request) bool {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization, DPoP, MCP-Protocol-Version")
	h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	return false
}

func (s *Server) serveResourceMetadata(w http.ResponseWriter, r *http.Request) {
	if allowCORS(w, r) {
		return
	}
	if r.Method != http.MethodGet {
		oerr(http.StatusMethodNotAllowed, ErrInvalidRequest, "use GET").write(w)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"resource":                          s.resource(r),
		"authorization_servers":             []string{issuer(r)},
		"scopes_supported":                  s.scopes,
		"bearer_methods_supported":          []string{"header"},
		"dpop_signing_alg_values_supported": DPoPAlgs,
		"resource_name":                     "delegateos gate",
	})
}

func (s *Server) serveServerMetadata(w http.ResponseWriter, r *http.Request) {
	if allowCORS(w, r) {
		return
	}
	if r.Method != http.MethodGet {
		oerr(http.StatusMethodNotAllowed, ErrInvalidRequest, "use GET").write(w)
		return
	}
	iss := issuer(r)
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         iss,
		"authorization_endpoint":                         iss + PathAuthorize,
		"token_endpoint":                                 iss + PathToken,
		"registration_endpoint":                          iss + PathRegister,
		"scopes_supported":                               s.scopes,
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token", GrantTokenExchange},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"code_challenge_methods_supported":               []string{"S256"},
		"dpop_signing_alg_values_supported":              DPoPAlgs,
		"authorization_response_iss_parameter_supported": true,
	})
}

func (s *Server) serveRegister(w http.ResponseWriter, r *http.Request) {
	if allowCORS(w, r) {
		return
	}
	if r.Method != http.MethodPost {
		oerr(http.StatusMethodNotAllowed, ErrInvalidRequest, "use POST").write(w)
		return
	}
	body, err := readBody(w, r, MaxRegistrationBytes, "application/json")
	if err != nil {
		err.write(w)
		return
	}
	reg, perr := ParseRegistration(body)
	if perr != nil {
		perr.(*Error).write(w)
		return
	}
	now := s.cfg.Now()
	c := &client{ID: "dos_" + randomHex(16), Reg: *reg, Registered: now}
	if err := s.clients.add(c); err != nil {
		oerr(http.StatusServiceUnavailable, ErrTemporarily, "too many registered clients are approved; try again later").write(w)
		return
	}
	s.log.Info("oauth client registered", zap.String("client_id", c.ID), zap.String("client_name", reg.ClientName), zap.Strings("redirect_uris", reg.RedirectURIs))
	out := map[string]any{
		"client_id": c.ID, "client_id_issued_at": now.Unix(),
		"redirect_uris": reg.RedirectURIs, "grant_types": reg.GrantTypes, "response_types": reg.ResponseTypes,
		"token_endpoint_auth_method": reg.TokenEndpointAuthMethod,
	}
	if reg.ClientName != "" {
		out["client_name"] = reg.ClientName
	}
	if reg.Scope != "" {
		out["scope"] = reg.Scope
	}
	writeJSON(w, http.StatusCreated, out)
}

// readBody reads a POST body of the media type want, at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, want string) ([]byte, *Error) {
	mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	if !strings.EqualFold(strings.TrimSpace(mt), want) {
		return nil, badRequest(ErrInvalidRequest, "the body must be "+want)
	}
	if r.ContentLength > limit {
		w.Header().Set("Connection", "close")
		return nil, oerr(http.StatusRequestEntityTooLarge, ErrInvalidRequest, fmt.Sprintf("the body is larger than %d bytes", limit))
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, oerr(http.StatusRequestEntityTooLarge, ErrInvalidRequest, fmt.Sprintf("the body is larger than %d bytes", limit))
		}
		return nil, badRequest(ErrInvalidRequest, "the body cannot be read")
	}
	return b, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// ContractPrefix begins the contract ID of every consent delegation an
// authorization server makes (then "oauth:" and the grant's contract),
// which each access token under it inherits: a token with such a link was
// issued by one, this or another gate's, and is accepted only by the
// server that issued it (RFC 8707: a token is for the resource it was
// issued for). The grant key signs the consent's link, so no holder can
// take it out.
const ContractPrefix = "oauth:"

// consentContract is the contract ID of a consent delegation under a
// grant of contract parent.
func consentContract(parent string) string {
	return ContractPrefix + clipBytes(parent, dct.MaxStringLen-len(ContractPrefix))
}

func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func newDelegationID() string { return "del_" + randomHex(6) }

func formatTime(t time.Time) string { return timestamp.Format(t) }
