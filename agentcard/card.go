package agentcard

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
)

// Path is where the card is served.
const Path = "/.well-known/agent-card.json"

// ProtocolVersion is the DelegateOS version of the delegateos member.
const ProtocolVersion = "0.2"

// Card configures the agent card of a verifier. Required: Name and Key.
type Card struct {
	Name, Description, Version string
	// Key is the verifier's identity.
	Key *identity.Keypair
	// PublicURL is the base URL the verifier is reached at
	// (https://gate.example.com); empty means the request's scheme and
	// Host.
	PublicURL string
	// MCPPath and RevocationPath are the paths of the MCP endpoint and the
	// revocation endpoint; an empty RevocationPath leaves the revocation
	// endpoint out.
	MCPPath, RevocationPath string
	// AcceptsRevocationPushes says whether the revocation endpoint takes
	// delegateos/revoke notifications.
	AcceptsRevocationPushes bool
	// RequireSignature says that every request must carry an AVP-Sig v2
	// signature by the token's holder.
	RequireSignature bool
	// Labels are free-form labels of the card, such as the ldp.* labels
	// of an LDP delegate (LDP §9.1); nil means none.
	Labels map[string]string
}

// Document is the card as served.
type Document struct {
	Name                string        `json:"name"`
	Description         string        `json:"description"`
	Version             string        `json:"version"`
	SupportedInterfaces []any         `json:"supportedInterfaces"`
	Capabilities        Capabilities  `json:"capabilities"`
	DefaultInputModes   []string      `json:"defaultInputModes"`
	DefaultOutputModes  []string      `json:"defaultOutputModes"`
	Skills              []any         `json:"skills"`
	DelegateOS          DelegateOSExt `json:"delegateos"`
	// Labels are the card's labels (LDP §9.1's ldp.* keys), when it has any.
	Labels map[string]string `json:"labels,omitempty"`
}

// Capabilities are the A2A capabilities: none of A2A's own.
type Capabilities struct {
	Streaming         bool `json:"streaming"`
	PushNotifications bool `json:"pushNotifications"`
}

// DelegateOSExt is the card's delegateos member.
type DelegateOSExt struct {
	Version   string `json:"version"`
	DID       string `json:"did"`
	Principal string `json:"principal"`
	// RevocationEndpoint serves the revocation list (GET, with ETag) and,
	// when AcceptsRevocationPushes, takes delegateos/revoke (POST).
	RevocationEndpoint      string   `json:"revocationEndpoint,omitempty"`
	AcceptsRevocationPushes bool     `json:"acceptsRevocationPushes"`
	TokenFormats            []string `json:"tokenFormats"`
	MCPEndpoint             string   `json:"mcpEndpoint,omitempty"`
	// RequestSignatures lists the request signatures required, if any.
	RequestSignatures []string `json:"requestSignatures"`
}

// Document builds the card for a request to base (scheme://host).
func (c *Card) Document(base string) Document {
	abs := func(p string) string {
		if p == "" {
			return ""
		}
		return strings.TrimSuffix(base, "/") + p
	}
	sigs := []string{}
	if c.RequireSignature {
		sigs = append(sigs, "AVP-Sig v2")
	}
	d := Document{
		Name: c.Name, Description: c.Description, Version: c.Version,
		SupportedInterfaces: []any{},
		DefaultInputModes:   []string{"application/json"},
		DefaultOutputModes:  []string{"application/json"},
		Skills:              []any{},
		Labels:              c.Labels,
		DelegateOS: DelegateOSExt{
			Version:                 ProtocolVersion,
			DID:                     c.Key.DID(),
			Principal:               c.Key.ID(),
			RevocationEndpoint:      abs(c.RevocationPath),
			AcceptsRevocationPushes: c.AcceptsRevocationPushes && c.RevocationPath != "",
			TokenFormats:            []string{dct.Format},
			MCPEndpoint:             abs(c.MCPPath),
			RequestSignatures:       sigs,
		},
	}
	if d.Description == "" {
		d.Description = "A delegateos gate: MCP calls are allowed only under a valid delegation capability token."
	}
	if d.Version == "" {
		d.Version = ProtocolVersion
	}
	return d
}

// Handler returns the http.Handler serving the card at Path (GET and
// HEAD). It fails if the card lacks a name or key or PublicURL is not an
// absolute http(s) URL.
func (c *Card) Handler() (http.Handler, error) {
	if c.Name == "" || c.Key == nil {
		return nil, errors.New("an agent card needs a name and a key")
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, errors.New("the public URL must be an absolute http or https URL without query or fragment")
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		base := c.PublicURL
		if base == "" {
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			base = scheme + "://" + r.Host
		}
		body, err := json.MarshalIndent(c.Document(base), "", "  ")
		if err != nil {
			http.Error(w, "cannot encode the card", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		if r.Method == http.MethodHead {
			return
		}
		w.Write(append(body, '\n'))
	}), nil
}
