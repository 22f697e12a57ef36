package dct

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/sig"
	"github.com/delegateos/delegateos/internal/strictjson"
	"github.com/delegateos/delegateos/internal/timestamp"
)

// Token is a decoded, structurally valid token whose signatures have NOT
// been checked. Obtain one with Parse; trust it only after Verify.
type Token struct {
	raw     string // the base64url form it was parsed from
	t       SignedToken
	enc     encoded
	issued  time.Time
	expires []time.Time         // per block: authority expiry, then each attenuation's (zero if unset)
	signers []ed25519.PublicKey // per block: issuer, then each attenuator
	sigs    [][]byte            // decoded signatures, in token order
}

// ParseInput accepts either the bare base64url token or the JSON form
// {"token": ..., "format": "delegateos-sjt-v1"}, with surrounding whitespace.
func ParseInput(s string) (*Token, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "{") {
		if len(s) > MaxWrapperLen {
			return nil, deny(Malformed, "token wrapper is %d bytes, over the limit of %d", len(s), MaxWrapperLen)
		}
		var w Serialized
		if err := strictjson.Unmarshal([]byte(s), &w); err != nil {
			return nil, deny(Malformed, "token wrapper: %v", err)
		}
		return ParseSerialized(w)
	}
	return Parse(s)
}

// ParseSerialized checks the wrapper's format and parses its token.
func ParseSerialized(s Serialized) (*Token, error) {
	if s.Format != Format {
		return nil, deny(Malformed, "unknown token format %q (want %q)", clip(s.Format), Format)
	}
	return Parse(s.Token)
}

// Parse decodes a base64url token (§10.1 step 1). The decoded JSON must be
// exactly the canonical encoding of the token it describes (§3.2 defines
// the serialized token as such), which refuses duplicate or differently
// cased member names, unknown members, non-canonical numbers and strings,
// and invalid UTF-8 in one comparison. Every failure is malformed_token.
func Parse(s string) (*Token, error) {
	if len(s) > MaxTokenLen {
		return nil, deny(Malformed, "token is %d bytes, over the limit of %d", len(s), MaxTokenLen)
	}
	if s == "" {
		return nil, deny(Malformed, "empty token")
	}
	data, err := b64.Decode(s)
	if err != nil {
		return nil, deny(Malformed, "token is not unpadded base64url")
	}
	tok := &Token{raw: s}
	// Unknown members, like every other deviation, fail the canonical
	// comparison below; Unmarshal is faster than a Decoder that refuses them.
	if err := json.Unmarshal(data, &tok.t); err != nil {
		return nil, deny(Malformed, "token JSON: %v", err)
	}
	if err := tok.validate(); err != nil {
		return nil, err
	}
	tok.enc = encodeTokenSized(&tok.t, len(data))
	if !bytes.Equal(tok.enc.all, data) {
		if !utf8.Valid(data) {
			return nil, deny(Malformed, "token JSON is not valid UTF-8")
		}
		if err := strictjson.Check(data); err != nil {
			return nil, deny(Malformed, "token JSON: %v", err)
		}
		return nil, deny(Malformed, "token JSON is not in canonical form (RFC 8785)")
	}
	return tok, nil
}

// validate checks structure and limits; it runs before anything else.
func (tok *Token) validate() error {
	t := &tok.t
	if t.Format != Format {
		return deny(Malformed, "unknown token format %q (want %q)", clip(t.Format), Format)
	}
	if len(t.Attenuations) > MaxAttenuations {
		return deny(Malformed, "token has %d attenuations, over the limit of %d", len(t.Attenuations), MaxAttenuations)
	}
	if len(t.Signatures) > MaxAttenuations+1 {
		return deny(Malformed, "token has %d signatures, over the limit of %d", len(t.Signatures), MaxAttenuations+1)
	}
	a := &t.Authority
	tok.signers = make([]ed25519.PublicKey, 0, 1+len(t.Attenuations))
	tok.expires = make([]time.Time, 0, 1+len(t.Attenuations))
	pub, err := principalField("authority.issuer", a.Issuer)
	if err != nil {
		return err
	}
	tok.signers = append(tok.signers, pub)
	if _, err := principalField("authority.delegatee", a.Delegatee); err != nil {
		return err
	}
	if err := capsField("authority.capabilities", a.Capabilities); err != nil {
		return err
	}
	if err := stringField("authority.contractId", a.ContractID); err != nil {
		return err
	}
	if err := stringField("authority.delegationId", a.DelegationID); err != nil {
		return err
	}
	if err := stringField("authority.parentDelegationId", a.ParentDelegationID); err != nil {
		return err
	}
	if err := intField("authority.chainDepth", a.ChainDepth); err != nil {
		return err
	}
	if err := intField("authority.maxChainDepth", a.MaxChainDepth); err != nil {
		return err
	}
	if err := intField("authority.maxBudgetMicrocents", a.MaxBudgetMicrocents); err != nil {
		return err
	}
	exp, err := timeField("authority.expiresAt", a.ExpiresAt)
	if err != nil {
		return err
	}
	tok.expires = append(tok.expires, exp)
	if tok.issued, err = timeField("authority.issuedAt", a.IssuedAt); err != nil {
		return err
	}
	for i := range t.Attenuations {
		at := &t.Attenuations[i]
		p := fmt.Sprintf("attenuations[%d].", i)
		pub, err := principalField(p+"attenuator", at.Attenuator)
		if err != nil {
			return err
		}
		tok.signers = append(tok.signers, pub)
		if _, err := principalField(p+"delegatee", at.Delegatee); err != nil {
			return err
		}
		if err := stringField(p+"delegationId", at.DelegationID); err != nil {
			return err
		}
		if err := stringField(p+"contractId", at.ContractID); err != nil {
			return err
		}
		if at.AllowedCapabilities != nil {
			if err := capsField(p+"allowedCapabilities", *at.AllowedCapabilities); err != nil {
				return err
			}
		}
		if at.MaxBudgetMicrocents != nil {
			if err := intField(p+"maxBudgetMicrocents", *at.MaxBudgetMicrocents); err != nil {
				return err
			}
		}
		if at.MaxChainDepth != nil {
			if err := intField(p+"maxChainDepth", *at.MaxChainDepth); err != nil {
				return err
			}
		}
		var exp time.Time
		if at.ExpiresAt != nil {
			if exp, err = timeField(p+"expiresAt", *at.ExpiresAt); err != nil {
				return err
			}
		}
		tok.expires = append(tok.expires, exp)
	}
	for i := range t.Signatures {
		s := &t.Signatures[i]
		p := fmt.Sprintf("signatures[%d].", i)
		if _, err := principalField(p+"signer", s.Signer); err != nil {
			return err
		}
		raw, err := sig.DecodeSignature(s.Signature)
		if err != nil {
			return deny(Malformed, "%ssignature: %v", p, err)
		}
		tok.sigs = append(tok.sigs, raw)
	}
	return nil
}

func principalField(name, v string) (ed25519.PublicKey, error) {
	pub, err := identity.PublicKey(v)
	if err != nil {
		return nil, deny(Malformed, "%s: %v", name, err)
	}
	return pub, nil
}

func stringField(name, v string) error {
	if len(v) > MaxStringLen {
		return deny(Malformed, "%s is %d bytes, over the limit of %d", name, len(v), MaxStringLen)
	}
	return nil
}

func intField(name string, v int64) error {
	if v < 0 || v > canon.MaxSafeInteger {
		return deny(Malformed, "%s is %d, outside 0..2^53-1", name, v)
	}
	return nil
}

func timeField(name, v string) (time.Time, error) {
	if len(v) > MaxStringLen {
		return time.Time{}, deny(Malformed, "%s is too long", name)
	}
	t, err := timestamp.Parse(v)
	if err != nil {
		return time.Time{}, deny(Malformed, "%s: %v", name, err)
	}
	return t, nil
}

func capsField(name string, caps []Capability) error {
	if caps == nil {
		return deny(Malformed, "%s is missing", name)
	}
	if len(caps) > MaxCapabilities {
		return deny(Malformed, "%s has %d entries, over the limit of %d", name, len(caps), MaxCapabilities)
	}
	for i, c := range caps {
		if c.Namespace == "" || c.Action == "" || len(c.Namespace) > MaxStringLen || len(c.Action) > MaxStringLen {
			return deny(Malformed, "%s[%d]: namespace and action must be 1..%d bytes", name, i, MaxStringLen)
		}
		if len(c.Resource) > MaxResourceLen || strings.Count(c.Resource, "/") >= MaxResourceSegments {
			return deny(Malformed, "%s[%d]: resource over %d bytes or %d segments", name, i, MaxResourceLen, MaxResourceSegments)
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}
