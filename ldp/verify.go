package ldp

import (
	"context"
	"time"

	"github.com/delegateos/delegateos/internal/timestamp"
)

// Verifier checks envelope signatures, timestamps and replays. The zero
// value takes Ed25519 envelopes only, with the default window and its own
// memory for replays. It is safe for concurrent use.
type Verifier struct {
	// HMACSecret is the secret shared with peers that sign with the
	// reference's hmac-sha256; empty means such envelopes are refused
	// (ReasonAlgorithm).
	HMACSecret string
	// RequireEd25519 refuses hmac-sha256 envelopes even with a secret.
	RequireEd25519 bool
	// Window is how far a timestamp may lie behind now; zero means
	// DefaultWindow.
	Window time.Duration
	// MaxAhead is how far it may lie ahead; zero means DefaultMaxAhead,
	// and it is never more than Window.
	MaxAhead time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Replay spends message IDs and nonces; nil means the Verifier's own
	// MemoryReplay.
	Replay ReplayStore

	mem MemoryReplay
}

// Verified says who signed an accepted envelope.
type Verified struct {
	// Algorithm is AlgHMACSHA256 or AlgEd25519.
	Algorithm string
	// Signer is the did:key that signed (Ed25519), or the envelope's from
	// (HMAC: any holder of the secret could have sent it).
	Signer string
	// Signed is the envelope's timestamp.
	Signed time.Time
	// Share, when set, is the share of the replay store the envelope's
	// message ID and nonce are counted in (its sender's delegation tree),
	// rather than its signer's; the Responder sets it.
	Share string
}

// Verify accepts e only if it is signed with an algorithm v takes, by
// signer when that is not empty (a did:key or principal ID; HMAC envelopes
// name no key, so they are refused when a signer is required), its
// signature covers it, its timestamp lies within the window, and neither
// its message_id nor its nonce was accepted before from the same signer.
// The checks run in that order, so a changed timestamp is reported as
// tampering, not as staleness; the message_id and nonce are spent only
// once everything else passed. Every refusal is an *Error.
//
// An Ed25519 signature is checked over the bytes ParseEnvelope read (the
// envelope as sent), so e must be verified as ParseEnvelope returned it:
// changing its fields first does not change what is verified.
func (v *Verifier) Verify(ctx context.Context, e *Envelope, signer string) (Verified, error) {
	out, err := v.Check(e, signer)
	if err != nil {
		return Verified{}, err
	}
	if err := v.Spend(ctx, e, out); err != nil {
		return Verified{}, err
	}
	return out, nil
}

// Check is Verify without spending the message_id and nonce: for a
// message whose replay changes nothing (HELLO), or one that must pass
// other checks before it may take a place in the replay store
// (SESSION_PROPOSE, before a session is admitted). Spend it afterwards.
func (v *Verifier) Check(e *Envelope, signer string) (Verified, error) {
	if e.Signature == "" {
		if e.SignatureAlgorithm != "" {
			return Verified{}, refuse(ReasonUnsigned, "signature_algorithm %s but no signature", e.SignatureAlgorithm)
		}
		return Verified{}, refuse(ReasonUnsigned, "the envelope carries no signature")
	}
	var out Verified
	switch e.SignatureAlgorithm {
	case AlgEd25519:
		if err := verifyEd25519(e, signer); err != nil {
			return Verified{}, err
		}
		out = Verified{Algorithm: AlgEd25519, Signer: e.Signer}
	case AlgHMACSHA256:
		if v.HMACSecret == "" || v.RequireEd25519 {
			return Verified{}, refuse(ReasonAlgorithm, "hmac-sha256 envelopes are not taken here; sign with ed25519")
		}
		if signer != "" {
			return Verified{}, refuse(ReasonWrongKey, "an hmac-sha256 envelope cannot show it was signed by %s; sign with ed25519", clip(signer))
		}
		if err := verifyHMAC(e, v.HMACSecret); err != nil {
			return Verified{}, err
		}
		out = Verified{Algorithm: AlgHMACSHA256, Signer: e.From}
	case "":
		return Verified{}, refuse(ReasonAlgorithm, "a signature without signature_algorithm")
	default:
		return Verified{}, refuse(ReasonAlgorithm, "unknown signature_algorithm %q", clip(e.SignatureAlgorithm))
	}
	ts, err := timestamp.Parse(e.Timestamp)
	if err != nil {
		return Verified{}, malformed("%v", err)
	}
	out.Signed = ts
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	window, ahead := v.windows()
	if now.Sub(ts) > window {
		return Verified{}, refuse(ReasonStale, "timestamp %s is %s old, the window is %s", e.Timestamp, now.Sub(ts).Round(time.Second), window)
	}
	if ts.Sub(now) > ahead {
		return Verified{}, refuse(ReasonStale, "timestamp %s is %s ahead of this clock, at most %s", e.Timestamp, ts.Sub(now).Round(time.Second), ahead)
	}
	return out, nil
}

// Spend records e's message_id (and nonce) as used by the signer Check
// found, until its timestamp leaves the window; a second Spend of the same
// is ReasonReplayed.
func (v *Verifier) Spend(ctx context.Context, e *Envelope, out Verified) error {
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	window, _ := v.windows()
	scope := out.Algorithm + "\x00" + out.Signer + "\x00"
	keys := []string{scope + "message_id\x00" + e.MessageID}
	if e.Nonce != "" {
		keys = append(keys, scope+"nonce\x00"+e.Nonce)
	}
	store := v.Replay
	if store == nil {
		store = &v.mem
	}
	// Past ts+window a replay is stale, so the keys need not be held longer.
	expires := out.Signed.Add(window + time.Millisecond)
	if ss, ok := store.(SharedReplayStore); ok && out.Share != "" {
		return ss.SpendShared(ctx, out.Share, keys, now, expires)
	}
	return store.Spend(ctx, keys, now, expires)
}

func (v *Verifier) windows() (window, ahead time.Duration) {
	window, ahead = v.Window, v.MaxAhead
	if window <= 0 {
		window = DefaultWindow
	}
	if ahead <= 0 {
		ahead = DefaultMaxAhead
	}
	return window, min(ahead, window)
}
