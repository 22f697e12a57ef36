package ldp

import (
	"fmt"
	"slices"
)

// TrustDomain is a named security boundary (§7.1).
type TrustDomain struct {
	Name             string   `json:"name"`
	AllowCrossDomain bool     `json:"allow_cross_domain"`
	TrustedPeers     []string `json:"trusted_peers"`
}

func (d *TrustDomain) check() error {
	if err := checkID("trust_domain.name", d.Name, true); err != nil {
		return err
	}
	if len(d.TrustedPeers) > MaxListLen {
		return fmt.Errorf("trust_domain.trusted_peers lists %d domains, at most %d", len(d.TrustedPeers), MaxListLen)
	}
	for _, p := range d.TrustedPeers {
		if err := checkID("trust_domain.trusted_peers", p, true); err != nil {
			return err
		}
	}
	return nil
}

// TrustError is a session refused by §7.2; Code is the SESSION_REJECT
// error code.
type TrustError struct {
	Code   string
	Detail string
}

func (e *TrustError) Error() string { return e.Code + ": " + e.Detail }

// Trust check codes.
const (
	CodeTrustDomainMismatch = "TRUST_DOMAIN_MISMATCH"
	CodeCrossDomainRefused  = "CROSS_DOMAIN_REFUSED"
	CodeUntrustedPeer       = "UNTRUSTED_PEER_DOMAIN"
)

// CheckTrust applies §7.2 before a responder in domain d accepts a session
// from an initiator in domain initiator that requires the responder to be
// in required (empty: no requirement):
//
//  1. a required domain must be the responder's;
//  2. a session from another domain is refused when d does not allow
//     cross-domain sessions;
//  3. when it does, the initiator's domain must be one of d's trusted peers.
//
// An initiator that names no domain is in none: it is never in the
// responder's domain nor a trusted peer, so it is refused (the reference's
// Python delegate calls it "unknown", to the same effect). The initiator's domain is its own claim; what a task may do is
// the delegation token's business, not the domain's.
func CheckTrust(d TrustDomain, initiator, required string) error {
	if required != "" && required != d.Name {
		return &TrustError{CodeTrustDomainMismatch, fmt.Sprintf("the session requires trust domain %q; this delegate is in %q", clip(required), d.Name)}
	}
	if initiator == d.Name && initiator != "" {
		return nil
	}
	from := initiator
	if from == "" {
		from = "(none named)"
	}
	if !d.AllowCrossDomain {
		return &TrustError{CodeCrossDomainRefused, fmt.Sprintf("trust domain %q takes no sessions from other domains; the initiator's is %q", d.Name, clip(from))}
	}
	if initiator == "" || !slices.Contains(d.TrustedPeers, initiator) {
		return &TrustError{CodeUntrustedPeer, fmt.Sprintf("trust domain %q does not list %q among its trusted peers", d.Name, clip(from))}
	}
	return nil
}
