package dct

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/timestamp"
)

// Revocations is consulted on every verification (§10.1 step 2).
type Revocations interface {
	// Revoked is given a token's block revocation IDs and the principal ID
	// that signed each block, authority first. It returns the revoked
	// block's ID when the token is revoked. An error (an unreadable list,
	// say) denies the token: revocation cannot be skipped by accident.
	Revoked(blockIDs, signers []string) (revocationID string, revoked bool, err error)
}

// Options configure a Verifier.
type Options struct {
	// Roots are the trusted root principals (principal IDs or did:key). A
	// token's authority.issuer must be one of them. Required.
	Roots []string
	// Revocations, when nil, means no revocation list is consulted.
	Revocations Revocations
	// ClockSkew is how far in the future authority.issuedAt may lie; zero
	// means DefaultClockSkew.
	ClockSkew time.Duration
	// CacheSize is the number of verified tokens kept; zero means
	// DefaultCacheSize and a negative value disables the cache.
	CacheSize int
}

// Request is what the presenter of a token asks to do.
type Request struct {
	Namespace, Action, Resource string
	// SpentMicrocents is what the delegation has spent so far. A negative
	// value is refused as budget_exceeded: it would report more budget
	// remaining than the token grants.
	SpentMicrocents int64
	// Now is the time of the request; zero means time.Now().
	Now time.Time
}

// AuthorizedScope is what a verified token grants (§10.1 step 8), with the
// chain it came through. Capabilities and Chain are shared with the
// Verifier's cache and must not be modified.
type AuthorizedScope struct {
	Capabilities              []Capability `json:"capabilities"`
	RemainingBudgetMicrocents int64        `json:"remainingBudgetMicrocents"`
	ChainDepth                int64        `json:"chainDepth"`
	// MaxChainDepth is the deepest chainDepth the chain may still reach:
	// MaxChainDepth − ChainDepth further attenuations are allowed.
	MaxChainDepth int64       `json:"maxChainDepth"`
	ContractID    string      `json:"contractId"`
	DelegationID  string      `json:"delegationId"`
	Issuer        string      `json:"issuer"`
	Delegatee     string      `json:"delegatee"`
	ExpiresAt     string      `json:"expiresAt"`
	Chain         []ChainLink `json:"chain"`
}

// Verifier verifies tokens for a fixed set of trusted roots. It remembers
// tokens whose signatures and chain it has checked, so presenting the same
// token again costs a map lookup; revocation, time, budget and capability
// are checked on every call. It is safe for concurrent use.
type Verifier struct {
	roots       map[string]bool
	revocations Revocations
	skew        time.Duration
	cache       *cache
	// last is the token checkString verified last, in front of the cache:
	// a proxy presents the same session token on every call, and comparing
	// it costs less than hashing it for the cache.
	last atomic.Pointer[lastToken]
}

type lastToken struct {
	token string
	vt    *verified
}

// NewVerifier returns a Verifier for the given options.
func NewVerifier(o Options) (*Verifier, error) {
	if len(o.Roots) == 0 {
		return nil, fmt.Errorf("no trusted roots: a verifier must be given the root principals it trusts")
	}
	v := &Verifier{roots: map[string]bool{}, revocations: o.Revocations, skew: o.ClockSkew}
	for _, r := range o.Roots {
		id, err := identity.NormalizePrincipal(r)
		if err != nil {
			return nil, fmt.Errorf("trusted root: %w", err)
		}
		v.roots[id] = true
	}
	if v.skew < 0 {
		return nil, fmt.Errorf("clock skew %s is negative", v.skew)
	}
	if v.skew == 0 {
		v.skew = DefaultClockSkew
	}
	size := o.CacheSize
	if size == 0 {
		size = DefaultCacheSize
	}
	if size > 0 {
		v.cache = newCache(size)
	}
	return v, nil
}

// verified is what the signature and chain checks established about a token.
type verified struct {
	tok     *Token
	revIDs  []string
	signers []string
	eff     effective
	expires string
	// chainScope is scope(0), made once: VerifyChain returns it to every
	// caller of the same token.
	chainScope *AuthorizedScope
}

// Verify verifies a serialized token (the bare base64url form, or the JSON
// {token, format} form) for a request. It returns the authorized scope, or
// a *Denial.
func (v *Verifier) Verify(token string, req Request) (*AuthorizedScope, error) {
	vt, err := v.checkString(token)
	if err != nil {
		return nil, err
	}
	return v.authorizeChecked(vt, req)
}

// VerifyToken verifies a parsed token for a request.
func (v *Verifier) VerifyToken(tok *Token, req Request) (*AuthorizedScope, error) {
	vt, err := v.check(tok)
	if err != nil {
		return nil, err
	}
	return v.authorizeChecked(vt, req)
}

// VerifyChain verifies a token without a particular request: parsing,
// revocation, the trusted root and signatures, the attenuation chain and
// the token's validity period (§10.1 steps 1 to 5). The scope it returns
// says what the token could grant; budget and capability are checked per
// request by Verify. A zero now means time.Now(). The scope is shared by
// every verification of the same token (a proxy verifies its session
// token on every call): read it, do not change it.
func (v *Verifier) VerifyChain(token string, now time.Time) (*AuthorizedScope, error) {
	vt, err := v.checkString(token)
	if err != nil {
		return nil, err
	}
	if err := v.checkTime(vt, now); err != nil {
		return nil, err
	}
	return vt.chainScope, nil
}

// checkString is check for a serialized token, using the cache first.
func (v *Verifier) checkString(token string) (*verified, error) {
	if l := v.last.Load(); l != nil && l.token == token {
		return l.vt, v.checkRevoked(l.vt)
	}
	if vt := v.cache.get(token); vt != nil {
		v.remember(token, vt)
		return vt, v.checkRevoked(vt)
	}
	tok, err := ParseInput(token)
	if err != nil {
		return nil, err
	}
	vt, err := v.check(tok)
	if err == nil && token != tok.raw {
		// The {token, format} form determines the token, so it can be a key too.
		v.cache.put(token, vt)
	}
	if err == nil {
		v.remember(token, vt)
	}
	return vt, err
}

// remember makes vt the last token verified, when the cache is on (a
// verifier without one verifies every token in full).
func (v *Verifier) remember(token string, vt *verified) {
	if v.cache != nil {
		v.last.Store(&lastToken{token: token, vt: vt})
	}
}

// check runs §10.1 steps 2 to 4, the signature and chain work only once
// per token: revocation is consulted on every call.
func (v *Verifier) check(tok *Token) (*verified, error) {
	if vt := v.cache.get(tok.raw); vt != nil {
		return vt, v.checkRevoked(vt)
	}
	vt := &verified{tok: tok, revIDs: tok.RevocationIDs(), signers: tok.Signers()}
	// Step 2 comes before the signature work, as the specification orders it.
	if err := v.checkRevoked(vt); err != nil {
		return nil, err
	}
	// Step 3.
	if !v.roots[tok.t.Authority.Issuer] {
		return nil, deny(InvalidSignature, "authority.issuer %s is not a trusted root", tok.t.Authority.Issuer)
	}
	if d := tok.verifySignatures(); d != nil {
		return nil, d
	}
	// Step 4.
	eff, d := tok.walk()
	if d != nil {
		return nil, d
	}
	vt.eff = eff
	vt.expires = timestamp.Format(eff.expires)
	vt.chainScope = vt.scope(0)
	v.cache.put(tok.raw, vt)
	return vt, nil
}

func (v *Verifier) checkRevoked(vt *verified) error {
	if v.revocations == nil {
		return nil
	}
	id, revoked, err := v.revocations.Revoked(vt.revIDs, vt.signers)
	if err != nil {
		d := deny(Revoked, "revocation status cannot be checked: %v", err)
		d.cause = err
		return d
	}
	if revoked {
		d := deny(Revoked, "block %s of this token has been revoked", id)
		d.RevocationID = id
		return d
	}
	return nil
}

// authorizeChecked is §10.1 steps 5 to 8.
func (v *Verifier) authorizeChecked(vt *verified, req Request) (*AuthorizedScope, error) {
	if err := v.checkTime(vt, req.Now); err != nil {
		return nil, err
	}
	e := &vt.eff
	if req.SpentMicrocents < 0 {
		return nil, deny(BudgetExceeded, "spent %d microcents: a spend cannot be negative", req.SpentMicrocents)
	}
	if req.SpentMicrocents >= e.budget {
		return nil, deny(BudgetExceeded, "spent %d of a budget of %d microcents", req.SpentMicrocents, e.budget)
	}
	granted := false
	for i := range e.caps {
		if e.caps[i].Covers(req.Namespace, req.Action, req.Resource) {
			granted = true
			break
		}
	}
	if !granted {
		return nil, &Denial{
			Type:      CapabilityNotGranted,
			Detail:    fmt.Sprintf("%s:%s on %q is not granted by this token", req.Namespace, req.Action, req.Resource),
			Requested: &Capability{Namespace: req.Namespace, Action: req.Action, Resource: req.Resource},
			Granted:   cloneSlice(e.caps), // callers render and may edit a denial
		}
	}
	return vt.scope(req.SpentMicrocents), nil
}

// checkTime is §10.1 step 5, with the not-yet-valid check added.
func (v *Verifier) checkTime(vt *verified, now time.Time) error {
	if now.IsZero() {
		now = time.Now()
	}
	if now.After(vt.eff.expires) {
		return deny(Expired, "token expired at %s", vt.expires)
	}
	if vt.tok.issued.After(now.Add(v.skew)) {
		return deny(Expired, "token is not valid yet: issued at %s, in the future", vt.tok.t.Authority.IssuedAt)
	}
	return nil
}

// scope is §10.1 step 8.
func (vt *verified) scope(spent int64) *AuthorizedScope {
	e := &vt.eff
	return &AuthorizedScope{
		Capabilities:              e.caps,
		RemainingBudgetMicrocents: e.budget - spent,
		ChainDepth:                e.chainDepth,
		MaxChainDepth:             e.chainDepth + e.remaining,
		ContractID:                e.contractID,
		DelegationID:              e.delegationID,
		Issuer:                    vt.tok.t.Authority.Issuer,
		Delegatee:                 e.delegatee,
		ExpiresAt:                 vt.expires,
		Chain:                     e.links,
	}
}
