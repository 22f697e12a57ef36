package dct

import (
	"encoding"

	"golang.org/x/crypto/blake2b"

	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/sig"
)

// The encoder writes the canonical JSON (RFC 8785) of the token types
// directly: members in sorted order, optional members omitted when unset.
// Verification needs the canonical bytes of every block, and this is an
// order of magnitude cheaper than generic canonicalization. Tests hold the
// output equal to canon.Marshal.

// encoded is a token's canonical bytes with the span of each block, so
// signature payloads and revocation IDs are slices of one buffer.
type encoded struct {
	all         []byte
	authority   span
	attenuation []span
}

type span struct{ start, end int }

func (s span) of(b []byte) []byte { return b[s.start:s.end] }

func encodeToken(t *SignedToken) encoded { return encodeTokenSized(t, 512+256*len(t.Attenuations)) }

// encodeTokenSized encodes into a buffer of the given capacity: Parse knows
// the exact length of a canonical token.
func encodeTokenSized(t *SignedToken, size int) encoded {
	e := encoded{all: make([]byte, 0, size), attenuation: make([]span, len(t.Attenuations))}
	b := append(e.all, `{"attenuations":[`...)
	for i := range t.Attenuations {
		if i > 0 {
			b = append(b, ',')
		}
		start := len(b)
		b = appendAttenuation(b, &t.Attenuations[i])
		e.attenuation[i] = span{start, len(b)}
	}
	b = append(b, `],"authority":`...)
	start := len(b)
	b = appendAuthority(b, &t.Authority)
	e.authority = span{start, len(b)}
	b = append(b, `,"format":`...)
	b = canon.AppendString(b, t.Format)
	b = append(b, `,"signatures":[`...)
	for i := range t.Signatures {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendSignature(b, &t.Signatures[i])
	}
	e.all = append(b, "]}"...)
	return e
}

func appendCapabilities(b []byte, caps []Capability) []byte {
	b = append(b, '[')
	for i, c := range caps {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"action":`...)
		b = canon.AppendString(b, c.Action)
		b = append(b, `,"namespace":`...)
		b = canon.AppendString(b, c.Namespace)
		b = append(b, `,"resource":`...)
		b = canon.AppendString(b, c.Resource)
		b = append(b, '}')
	}
	return append(b, ']')
}

func appendAuthority(b []byte, a *Authority) []byte {
	b = append(b, `{"capabilities":`...)
	b = appendCapabilities(b, a.Capabilities)
	b = append(b, `,"chainDepth":`...)
	b = canon.AppendInt(b, a.ChainDepth)
	b = append(b, `,"contractId":`...)
	b = canon.AppendString(b, a.ContractID)
	b = append(b, `,"delegatee":`...)
	b = canon.AppendString(b, a.Delegatee)
	b = append(b, `,"delegationId":`...)
	b = canon.AppendString(b, a.DelegationID)
	b = append(b, `,"expiresAt":`...)
	b = canon.AppendString(b, a.ExpiresAt)
	b = append(b, `,"issuedAt":`...)
	b = canon.AppendString(b, a.IssuedAt)
	b = append(b, `,"issuer":`...)
	b = canon.AppendString(b, a.Issuer)
	b = append(b, `,"maxBudgetMicrocents":`...)
	b = canon.AppendInt(b, a.MaxBudgetMicrocents)
	b = append(b, `,"maxChainDepth":`...)
	b = canon.AppendInt(b, a.MaxChainDepth)
	b = append(b, `,"parentDelegationId":`...)
	b = canon.AppendString(b, a.ParentDelegationID)
	return append(b, '}')
}

func appendAttenuation(b []byte, a *Attenuation) []byte {
	b = append(b, '{')
	if a.AllowedCapabilities != nil {
		b = append(b, `"allowedCapabilities":`...)
		b = appendCapabilities(b, *a.AllowedCapabilities)
		b = append(b, ',')
	}
	b = append(b, `"attenuator":`...)
	b = canon.AppendString(b, a.Attenuator)
	b = append(b, `,"contractId":`...)
	b = canon.AppendString(b, a.ContractID)
	b = append(b, `,"delegatee":`...)
	b = canon.AppendString(b, a.Delegatee)
	b = append(b, `,"delegationId":`...)
	b = canon.AppendString(b, a.DelegationID)
	if a.ExpiresAt != nil {
		b = append(b, `,"expiresAt":`...)
		b = canon.AppendString(b, *a.ExpiresAt)
	}
	if a.MaxBudgetMicrocents != nil {
		b = append(b, `,"maxBudgetMicrocents":`...)
		b = canon.AppendInt(b, *a.MaxBudgetMicrocents)
	}
	if a.MaxChainDepth != nil {
		b = append(b, `,"maxChainDepth":`...)
		b = canon.AppendInt(b, *a.MaxChainDepth)
	}
	return append(b, '}')
}

func appendSignature(b []byte, s *Signature) []byte {
	b = append(b, `{"covers":`...)
	if s.Covers == AuthorityBlock {
		b = append(b, `"authority"`...)
	} else {
		b = canon.AppendInt(b, int64(s.Covers))
	}
	b = append(b, `,"signature":`...)
	b = canon.AppendString(b, s.Signature)
	b = append(b, `,"signer":`...)
	b = canon.AppendString(b, s.Signer)
	return append(b, '}')
}

// authorityPayload is canonicalize({authority}) (§3.3).
func authorityPayload(authority []byte) []byte {
	p := make([]byte, 0, len(authority)+14)
	p = append(p, `{"authority":`...)
	p = append(p, authority...)
	return append(p, '}')
}

// attenuationPayload is canonicalize({authority, attenuations[0..i]}) (§3.4):
// "attenuations" sorts before "authority". Verification hashes the same
// bytes without building them (attenuationDigests).
func attenuationPayload(e *encoded, i int) []byte {
	atts := e.all[e.attenuation[0].start:e.attenuation[i].end]
	auth := e.authority.of(e.all)
	p := make([]byte, 0, len(atts)+len(auth)+32)
	p = append(p, `{"attenuations":[`...)
	p = append(p, atts...)
	p = append(p, `],"authority":`...)
	p = append(p, auth...)
	return append(p, '}')
}

// The fixed parts of the signed payloads.
var (
	authorityOpen    = []byte(`{"authority":`)
	attenuationsOpen = []byte(`{"attenuations":[`)
	authorityAfter   = []byte(`],"authority":`)
	payloadClose     = []byte(`}`)
)

// authorityDigest is BLAKE2b-256 of authorityPayload, without building it.
func authorityDigest(e *encoded) [32]byte {
	var d [32]byte
	h, _ := blake2b.New256(nil) // cannot fail without a key
	h.Write(authorityOpen)
	h.Write(e.authority.of(e.all))
	h.Write(payloadClose)
	h.Sum(d[:0])
	return d
}

// attenuationDigests is BLAKE2b-256 of attenuationPayload for every
// attenuation. The payloads share their beginning, {"attenuations":[ and
// the blocks before, so one hash runs along it and a copy of its state
// finishes each payload: hashing is linear in the token, not quadratic.
func attenuationDigests(e *encoded) [][32]byte {
	out := make([][32]byte, len(e.attenuation))
	if len(out) == 0 {
		return out
	}
	auth := e.authority.of(e.all)
	prefix, _ := blake2b.New256(nil)
	payload, _ := blake2b.New256(nil)
	prefix.Write(attenuationsOpen)
	from := e.attenuation[0].start
	for i, s := range e.attenuation {
		prefix.Write(e.all[from:s.end]) // the separating comma and block i
		from = s.end
		state, err := prefix.(encoding.BinaryMarshaler).MarshalBinary()
		if err != nil || payload.(encoding.BinaryUnmarshaler).UnmarshalBinary(state) != nil {
			out[i] = sig.Digest(attenuationPayload(e, i)) // unreachable with x/crypto's blake2b
			continue
		}
		payload.Write(authorityAfter)
		payload.Write(auth)
		payload.Write(payloadClose)
		payload.Sum(out[i][:0])
	}
	return out
}
