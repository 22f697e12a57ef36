package reputation

import (
	"fmt"
	"strings"

	"github.com/delegateos/delegateos/identity"
)

// ValidDID reports whether s is a syntactically valid W3C DID
// ("did:" method ":" method-specific-id, DID Core §3.1) of at most MaxIDLen
// bytes. It does not resolve the DID: the profiles of other tools may name
// agents by any method (the spec's own examples use did:key values that
// are not keys), and §6 asks only for "a valid DID string".
func ValidDID(s string) bool {
	if len(s) > MaxIDLen {
		return false
	}
	rest, ok := strings.CutPrefix(s, "did:")
	if !ok {
		return false
	}
	method, id, ok := strings.Cut(rest, ":")
	if !ok || method == "" || id == "" || strings.HasSuffix(id, ":") {
		return false
	}
	for i := 0; i < len(method); i++ {
		if c := method[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return false
		}
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '-', c == '_', c == ':':
		case c == '%':
			if i+2 >= len(id) || !isHex(id[i+1]) || !isHex(id[i+2]) {
				return false
			}
			i += 2
		default:
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// CanonicalDID returns the did:key of an Ed25519 agent given as a principal
// ID or a did:key. This package stores every agent it is given this way.
func CanonicalDID(s string) (string, error) {
	id, err := identity.NormalizePrincipal(s)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnsupportedAgent, err)
	}
	did, err := identity.DIDFromPrincipalID(id)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnsupportedAgent, err)
	}
	return did, nil
}

// sourceDID returns the DID to store as a signal's source: the did:key of
// an Ed25519 principal, or any other valid DID as given.
func sourceDID(s string) (string, error) {
	if did, err := CanonicalDID(s); err == nil {
		return did, nil
	}
	if ValidDID(s) {
		return s, nil
	}
	return "", fmt.Errorf("%w: source %q is neither a principal ID nor a DID", ErrInvalid, clip(s))
}

// SameAgent reports whether a and b name the same agent: a principal ID and
// the did:key of the same Ed25519 key are one agent; other DIDs are
// compared as given. An empty string names no agent.
func SameAgent(a, b string) bool {
	return a != "" && b != "" && agentKey(a) == agentKey(b)
}

// agentKey is the form in which two names of one agent are equal.
func agentKey(s string) string {
	if did, err := CanonicalDID(s); err == nil {
		return did
	}
	return s
}

// selfDealing refuses an evaluation of c from src in which the delegate
// would rate itself: it is the delegator or the evaluator.
func selfDealing(c *Contract, src string) error {
	role := ""
	switch {
	case SameAgent(c.Delegate, c.Delegator):
		role = SelfDelegator
	case SameAgent(c.Delegate, src):
		role = SelfEvaluator
	default:
		return nil
	}
	return &SelfDealingError{Contract: c.ID(), Delegate: c.Delegate, Role: role}
}
