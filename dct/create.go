package dct

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/sig"
	"github.com/delegateos/delegateos/internal/timestamp"
)

// CreateParams describe a root token (§3.3).
type CreateParams struct {
	Issuer *identity.Keypair
	// Delegatee is a principal ID or did:key.
	Delegatee    string
	Capabilities []Capability
	ContractID   string
	DelegationID string
	// ParentDelegationID defaults to RootParentDelegationID.
	ParentDelegationID  string
	ChainDepth          int64
	MaxChainDepth       int64
	MaxBudgetMicrocents int64
	ExpiresAt           time.Time
	// IssuedAt defaults to time.Now().
	IssuedAt time.Time
}

// Create mints and signs a root token.
func Create(p CreateParams) (*Token, error) {
	if p.Issuer == nil {
		return nil, errors.New("no issuer key")
	}
	delegatee, err := identity.NormalizePrincipal(p.Delegatee)
	if err != nil {
		return nil, fmt.Errorf("delegatee: %w", err)
	}
	if err := checkNewCaps(p.Capabilities); err != nil {
		return nil, err
	}
	if p.ContractID == "" || p.DelegationID == "" {
		return nil, errors.New("a token needs a contract ID and a delegation ID")
	}
	if p.ParentDelegationID == "" {
		p.ParentDelegationID = RootParentDelegationID
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"chain depth", p.ChainDepth}, {"max chain depth", p.MaxChainDepth}, {"budget", p.MaxBudgetMicrocents}} {
		if f.v < 0 || f.v > canon.MaxSafeInteger {
			return nil, fmt.Errorf("%s %d is outside 0..2^53-1", f.name, f.v)
		}
	}
	if p.ChainDepth > p.MaxChainDepth {
		return nil, fmt.Errorf("chain depth %d exceeds max chain depth %d", p.ChainDepth, p.MaxChainDepth)
	}
	if p.IssuedAt.IsZero() {
		p.IssuedAt = time.Now()
	}
	issued, expires := timestamp.Truncate(p.IssuedAt), timestamp.Truncate(p.ExpiresAt)
	if err := writableYear(issued, expires); err != nil {
		return nil, err
	}
	if !expires.After(issued) {
		return nil, fmt.Errorf("expiry %s is not after issue time %s", timestamp.Format(expires), timestamp.Format(issued))
	}
	t := SignedToken{
		Format: Format,
		Authority: Authority{
			Issuer:              p.Issuer.ID(),
			Delegatee:           delegatee,
			Capabilities:        append([]Capability{}, p.Capabilities...),
			ContractID:          p.ContractID,
			DelegationID:        p.DelegationID,
			ParentDelegationID:  p.ParentDelegationID,
			ChainDepth:          p.ChainDepth,
			MaxChainDepth:       p.MaxChainDepth,
			MaxBudgetMicrocents: p.MaxBudgetMicrocents,
			ExpiresAt:           timestamp.Format(expires),
			IssuedAt:            timestamp.Format(issued),
		},
		Attenuations: []Attenuation{},
	}
	e := encodeToken(&t)
	t.Signatures = []Signature{{
		Signer:    p.Issuer.ID(),
		Signature: sig.SignCanonical(p.Issuer.PrivateKey(), authorityPayload(e.authority.of(e.all))),
		Covers:    AuthorityBlock,
	}}
	return reparse(&t)
}

// AttenuateParams describe an attenuation (§3.4). Nil optional fields leave
// the parent's value in force and are omitted from the token.
type AttenuateParams struct {
	// Attenuator must be the token's current delegatee.
	Attenuator *identity.Keypair
	// Delegatee is a principal ID or did:key.
	Delegatee    string
	DelegationID string
	// ContractID defaults to the parent's contract.
	ContractID          string
	Capabilities        *[]Capability
	MaxBudgetMicrocents *int64
	ExpiresAt           *time.Time
	MaxChainDepth       *int64
	// Now is used to refuse an attenuation of an expired parent or one that
	// would already be expired; zero means time.Now().
	Now time.Time
}

// Attenuate appends a narrower block for a new delegatee, signed by the
// current delegatee. The parent's signatures and chain are checked first
// (its root is not: that is the verifier's job), and the new block must
// narrow the parent as verification will require.
func Attenuate(parent *Token, p AttenuateParams) (*Token, error) {
	if p.Attenuator == nil {
		return nil, errors.New("no attenuator key")
	}
	if d := parent.verifySignatures(); d != nil {
		return nil, fmt.Errorf("parent token: %w", d)
	}
	eff, d := parent.walk()
	if d != nil {
		return nil, fmt.Errorf("parent token: %w", d)
	}
	now := p.Now
	if now.IsZero() {
		now = time.Now()
	}
	if now.After(eff.expires) {
		return nil, fmt.Errorf("the parent token expired at %s", timestamp.Format(eff.expires))
	}
	if p.Attenuator.ID() != eff.delegatee {
		return nil, fmt.Errorf("the attenuating key %s is not the token's current delegatee %s", p.Attenuator.ID(), eff.delegatee)
	}
	delegatee, err := identity.NormalizePrincipal(p.Delegatee)
	if err != nil {
		return nil, fmt.Errorf("delegatee: %w", err)
	}
	if p.DelegationID == "" {
		return nil, errors.New("an attenuation needs a delegation ID")
	}
	if p.ContractID == "" {
		p.ContractID = eff.contractID
	}
	if eff.remaining < 1 {
		return nil, fmt.Errorf("the token allows no further delegation (chain depth %d reached)", eff.chainDepth)
	}
	at := Attenuation{
		Attenuator:   p.Attenuator.ID(),
		Delegatee:    delegatee,
		DelegationID: p.DelegationID,
		ContractID:   p.ContractID,
	}
	if p.Capabilities != nil {
		caps := append([]Capability{}, *p.Capabilities...)
		if err := checkNewCaps(caps); err != nil {
			return nil, err
		}
		if c, ok := capsSubset(caps, eff.caps); !ok {
			return nil, fmt.Errorf("capability %s is not within the parent's capabilities %s", c, capList(eff.caps))
		}
		at.AllowedCapabilities = &caps
	}
	if p.MaxBudgetMicrocents != nil {
		b := *p.MaxBudgetMicrocents
		if b < 0 || b > eff.budget {
			return nil, fmt.Errorf("budget %d is outside the parent's 0..%d", b, eff.budget)
		}
		at.MaxBudgetMicrocents = &b
	}
	if p.ExpiresAt != nil {
		exp := timestamp.Truncate(*p.ExpiresAt)
		if err := writableYear(exp); err != nil {
			return nil, err
		}
		if exp.After(eff.expires) {
			return nil, fmt.Errorf("expiry %s is after the parent's %s", timestamp.Format(exp), timestamp.Format(eff.expires))
		}
		if !exp.After(now) {
			return nil, fmt.Errorf("expiry %s is already past", timestamp.Format(exp))
		}
		s := timestamp.Format(exp)
		at.ExpiresAt = &s
	}
	if p.MaxChainDepth != nil {
		m := *p.MaxChainDepth
		if m < 0 || m >= eff.remaining {
			return nil, fmt.Errorf("max chain depth %d must be below the %d delegations the parent leaves (0..%d)", m, eff.remaining, eff.remaining-1)
		}
		at.MaxChainDepth = &m
	}
	t := parent.Unverified()
	t.Attenuations = append(t.Attenuations, at)
	e := encodeToken(&t)
	i := len(t.Attenuations) - 1
	t.Signatures = append(t.Signatures, Signature{
		Signer:    p.Attenuator.ID(),
		Signature: sig.SignCanonical(p.Attenuator.PrivateKey(), attenuationPayload(&e, i)),
		Covers:    Covers(i),
	})
	return reparse(&t)
}

// reparse serializes a token and parses it back, so everything this
// package emits has passed the same checks as anything it reads.
func reparse(t *SignedToken) (*Token, error) {
	tok, err := Parse(b64.Encode(encodeToken(t).all))
	if err != nil {
		return nil, fmt.Errorf("new token is invalid: %w", err)
	}
	return tok, nil
}

// checkNewCaps refuses capabilities that would be legal to verify but are
// almost certainly a mistake to issue.
func checkNewCaps(caps []Capability) error {
	if len(caps) > MaxCapabilities {
		return fmt.Errorf("%d capabilities, over the limit of %d", len(caps), MaxCapabilities)
	}
	for _, c := range caps {
		if c.Namespace == "" || c.Action == "" || c.Resource == "" {
			return fmt.Errorf("capability %q needs a namespace, an action and a resource", c.String())
		}
		for _, seg := range strings.Split(c.Resource, "/") {
			if seg != "*" && seg != "**" && strings.Contains(seg, "*") {
				return fmt.Errorf("capability %q: '*' must be a whole path segment (\"*\" or \"**\"); %q would only match itself", c.String(), seg)
			}
		}
	}
	return nil
}

func capList(caps []Capability) string {
	s := make([]string, len(caps))
	for i, c := range caps {
		s[i] = c.String()
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// ParseCapability reads "namespace:action:resource". The resource is
// everything after the second colon, so it may contain colons (URLs).
func ParseCapability(s string) (Capability, error) {
	ns, rest, ok1 := strings.Cut(s, ":")
	action, resource, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || ns == "" || action == "" || resource == "" {
		return Capability{}, fmt.Errorf("capability %q: want NAMESPACE:ACTION:RESOURCE, e.g. docs:read:/project/**", s)
	}
	return Capability{Namespace: ns, Action: action, Resource: resource}, nil
}

// writableYear refuses times whose timestamp form (four-digit years) could
// not be read back: such a token could never be verified.
func writableYear(ts ...time.Time) error {
	for _, t := range ts {
		if y := t.UTC().Year(); y < 0 || y > 9999 {
			return fmt.Errorf("time %s is outside the years 0000..9999 a timestamp can hold", t)
		}
	}
	return nil
}
