package reputation

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/delegateos/delegateos/identity"
)

// ValidSlug reports whether s can name a workspace file: one to MaxSlugLen
// lowercase letters, digits and hyphens, starting with a letter or digit
// (§2.1). Such a name has no path separator and no dot, so no slug leads
// out of its directory.
func ValidSlug(s string) bool {
	if s == "" || len(s) > MaxSlugLen || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// validName reports whether s is a valid dimension, domain or criterion
// name: a slug of at most MaxNameLen bytes.
func validName(s string) bool { return len(s) <= MaxNameLen && ValidSlug(s) }

// Slugify turns free text (an artifact tag, a name) into a slug of at most
// MaxNameLen bytes: ASCII letters lowercased, every run of other characters
// one hyphen, no hyphen at either end. It returns "" when nothing is left.
func Slugify(s string) string {
	var b strings.Builder
	hyphen := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			hyphen = true
			continue
		}
		need := 1
		if hyphen && b.Len() > 0 {
			need = 2
		}
		if b.Len()+need > MaxNameLen {
			break
		}
		if need == 2 {
			b.WriteByte('-')
		}
		hyphen = false
		b.WriteByte(c)
	}
	return b.String()
}

// keySlugEncoding writes public keys in slugs: base32, lowercase, unpadded.
var keySlugEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// AgentSlug returns the slug of the profile this package creates for an
// Ed25519 agent (a principal ID or did:key): "key-" and the public key in
// lowercase base32. Lowercasing the did:key itself would not do: base58 is
// case-sensitive, so two keys could share a slug. Profiles written by other
// tools may use any slug; lookups by DID find them too.
func AgentSlug(agent string) (string, error) {
	pub, err := identity.ParsePrincipal(agent)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnsupportedAgent, err)
	}
	return "key-" + keySlugEncoding.EncodeToString(pub), nil
}

// LinkSlug returns the slug of the RDP contract that tracks a DelegateOS
// delegation: "del-" and the 12 hex digits of a delegation ID of the
// spec's form del_XXXXXXXXXXXX, or "del-x-" and 128 bits of the SHA-256 of
// any other ID. The two forms cannot collide; the contract also records
// the delegation ID, which is compared on every lookup.
func LinkSlug(delegationID string) (string, error) {
	if delegationID == "" || len(delegationID) > MaxIDLen {
		return "", fmt.Errorf("%w: delegation ID must be 1 to %d bytes", ErrInvalid, MaxIDLen)
	}
	if hexPart, ok := strings.CutPrefix(delegationID, "del_"); ok && len(hexPart) == 12 && isLowerHex(hexPart) {
		return "del-" + hexPart, nil
	}
	sum := sha256.Sum256([]byte(delegationID))
	return "del-x-" + hex.EncodeToString(sum[:16]), nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
