package avpsig

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/delegateos/delegateos/identity"
)

// Reason says why a request's signature was refused.
type Reason string

// The reasons of an *Error.
const (
	// ReasonMissing: no AVP-Sig signature.
	ReasonMissing Reason = "signature_missing"
	// ReasonMalformed: the header or its parameters do not parse, or the
	// request's query is not valid URL encoding.
	ReasonMalformed Reason = "signature_malformed"
	// ReasonWrongKey: signed by a DID other than the one required.
	ReasonWrongKey Reason = "signature_wrong_key"
	// ReasonStale: the timestamp lies outside the window.
	ReasonStale Reason = "signature_stale"
	// ReasonBodyTampered: the signer signed another body.
	ReasonBodyTampered Reason = "signature_body_tampered"
	// ReasonQueryTampered: the signer signed another query.
	ReasonQueryTampered Reason = "signature_query_tampered"
	// ReasonBadSignature: the signature does not cover this request (its
	// method, path, query or body changed, and the client did not say
	// which with AVP-Sig-Covered) or was not made with the DID's key.
	ReasonBadSignature Reason = "signature_invalid"
	// ReasonReplayed: the nonce was accepted before within the window.
	ReasonReplayed Reason = "signature_replayed"
	// ReasonBusy: MaxNonces nonces are live; the request is refused
	// rather than an unexpired nonce forgotten.
	ReasonBusy Reason = "signature_busy"
	// ReasonUnavailable: the nonce store could not say whether the nonce
	// was spent (Redis did not answer); the request is refused.
	ReasonUnavailable Reason = "signature_store_unavailable"
)

// Error is a refused signature.
type Error struct {
	Reason Reason
	Detail string
	// Err is the cause, when a store failed (ReasonUnavailable).
	Err error
}

func (e *Error) Error() string { return string(e.Reason) + ": " + e.Detail }

// Unwrap returns the cause, if any.
func (e *Error) Unwrap() error { return e.Err }

func refuse(r Reason, format string, args ...any) *Error {
	return &Error{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// Verifier checks AVP-Sig v2 signatures and remembers their nonces. The
// zero value is ready to use with the defaults. It is safe for concurrent
// use.
type Verifier struct {
	// Window is how far a timestamp may lie behind now; zero means
	// DefaultWindow.
	Window time.Duration
	// MaxAhead is how far a timestamp may lie ahead of now (a client's
	// clock may run fast): a timestamp further ahead is refused as stale,
	// since its nonce would be held for longer than the window. Zero
	// means DefaultMaxAhead; it is never more than the Window.
	MaxAhead time.Duration
	// MaxNonces bounds the nonces held in the Verifier's own memory (no
	// Store); zero means DefaultMaxNonces.
	MaxNonces int
	// MaxNoncesPerTree bounds the nonces held there for one delegation
	// tree (see VerifyInTree), so that the holders of one token, however
	// many keys they attenuate it to, cannot take them all; zero means
	// DefaultMaxNoncesPerTree.
	MaxNoncesPerTree int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Header is the request header Verify reads the signature from; empty
	// means SignatureHeader or Authorization (where AVP puts it; other
	// schemes there, such as Bearer, are left alone): a request must carry
	// exactly one AVP-Sig value in them.
	Header string

	// Store spends the nonces of verified signatures; nil means the
	// Verifier's own memory, bounded by MaxNonces and MaxNoncesPerTree.
	// Verifiers in several processes that share a Store (RedisNonces)
	// accept each nonce once between them.
	Store NonceStore

	// mem holds the nonces when Store is nil.
	mem MemoryNonces
}

// Verify checks the signature of r, whose body the caller has read into
// body, against signer (a did:key or principal ID: for a delegation token,
// its current delegatee). A nil error means the request is accepted and
// its nonce now spent; otherwise the error is an *Error.
func (v *Verifier) Verify(r *http.Request, body []byte, signer string) error {
	return v.VerifyInTree(r, body, signer, "")
}

// VerifyInTree is Verify for a signer that acts in a delegation tree:
// tree names it (for a delegation token, an ID of its root block, which
// only the root's key can make), and the signer's nonce counts against
// the tree's bound rather than against its own key's, since the holder of
// a token can attenuate it to as many keys as she likes. Empty means the
// signer's key is a tree of its own.
func (v *Verifier) VerifyInTree(r *http.Request, body []byte, signer, tree string) error {
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	var sigs []string
	if v.Header != "" {
		sigs = r.Header.Values(v.Header)
	} else {
		sigs = r.Header.Values(SignatureHeader)
		for _, a := range r.Header.Values("Authorization") {
			if scheme, _, _ := strings.Cut(a, " "); strings.EqualFold(scheme, Scheme) {
				sigs = append(sigs, a)
			}
		}
	}
	return v.verifyParts(r.Context(), r.Method, path, r.URL.RawQuery, sigs, r.Header.Values(CoveredHeader), body, signer, tree)
}

// VerifyParts is Verify given the parts of a request: every AVP-Sig value
// and every AVP-Sig-Covered value it carries.
func (v *Verifier) VerifyParts(method, path, rawQuery string, signatures, covered []string, body []byte, signer string) error {
	return v.verifyParts(context.Background(), method, path, rawQuery, signatures, covered, body, signer, "")
}

// verifyParts is VerifyParts in a tree (see VerifyInTree); ctx bounds the
// nonce store's work.
func (v *Verifier) verifyParts(ctx context.Context, method, path, rawQuery string, signatures, covered []string, body []byte, signer, tree string) error {
	want, err := identity.ParsePrincipal(signer)
	if err != nil {
		return refuse(ReasonWrongKey, "the required signer %q is not a key: %v", clip(signer), err)
	}
	if len(signatures) == 0 {
		return refuse(ReasonMissing, "the request has no AVP-Sig signature (in %s); sign it with the key of %s", SignatureHeader, identity.DIDFromPublicKey(want))
	}
	if len(signatures) > 1 {
		return refuse(ReasonMalformed, "the request has %d AVP-Sig signatures; send one", len(signatures))
	}
	h, err := ParseHeader(signatures[0])
	if err != nil {
		return refuse(ReasonMalformed, "%v", err)
	}
	pub, err := identity.PublicKeyFromDID(h.DID)
	if err != nil {
		return refuse(ReasonMalformed, "did: %v", err)
	}
	if !pub.Equal(want) {
		return refuse(ReasonWrongKey, "signed by %s, but the token's holder is %s", h.DID, identity.DIDFromPublicKey(want))
	}
	clock := v.clock()
	now := clock.Unix()
	win := int64(v.window() / time.Second)
	if h.TS < now-win {
		return refuse(ReasonStale, "signed at %d, %d s before the verifier's clock (%d); the window is %d s", h.TS, now-h.TS, now, win)
	}
	if ahead := v.maxAhead(); h.TS > now+ahead {
		return refuse(ReasonStale, "signed at %d, %d s ahead of the verifier's clock (%d); a timestamp may be at most %d s ahead (is the client's clock fast?)", h.TS, h.TS-now, now, ahead)
	}
	q, err := CanonicalQuery(rawQuery)
	if err != nil {
		return refuse(ReasonMalformed, "%v", err)
	}
	bh := BodySHA256(body)
	if !ed25519.Verify(pub, Message(method, path, q, h.TS, h.Nonce, bh), h.Sig) {
		return explain(pub, h, method, path, q, bh, covered)
	}
	return v.spend(ctx, pub, h, tree, clock, win)
}

// explain tells why a signature failed, using what the client says it
// signed only if the signature verifies over exactly that.
func explain(pub ed25519.PublicKey, h Header, method, path, q, bh string, covered []string) *Error {
	if len(covered) == 1 {
		if c, err := ParseCovered(covered[0]); err == nil &&
			ed25519.Verify(pub, Message(method, path, c.Query, h.TS, h.Nonce, c.BodySHA256), h.Sig) {
			switch {
			case c.BodySHA256 != bh && c.Query != q:
				return refuse(ReasonBodyTampered, "the body and the query differ from what was signed (body SHA-256 %s, signed %s; query %q, signed %q)", bh, c.BodySHA256, clip(q), clip(c.Query))
			case c.BodySHA256 != bh:
				return refuse(ReasonBodyTampered, "the body differs from what was signed (SHA-256 %s, signed %s)", bh, c.BodySHA256)
			case c.Query != q:
				return refuse(ReasonQueryTampered, "the query differs from what was signed (canonical %q, signed %q)", clip(q), clip(c.Query))
			}
		}
	}
	return refuse(ReasonBadSignature, "the signature does not verify over %s %s with %s's key", method, clip(path), identity.DIDFromPublicKey(pub))
}

// spend spends the nonce of a verified signature, refusing a replay.
func (v *Verifier) spend(ctx context.Context, pub ed25519.PublicKey, h Header, tree string, now time.Time, win int64) error {
	n := Nonce{Signer: pub, DID: h.DID, Tree: tree, Nonce: h.Nonce, Now: now, Signed: time.Unix(h.TS, 0), Expires: time.Unix(h.TS+win+1, 0)}
	if v.Store == nil {
		return v.mem.spend(n, v.MaxNonces, v.MaxNoncesPerTree)
	}
	err := v.Store.Spend(ctx, n)
	if err == nil {
		return nil
	}
	if e, ok := err.(*Error); ok {
		return e
	}
	// A store that cannot say why has not said the nonce is spent.
	return &Error{Reason: ReasonUnavailable, Detail: err.Error(), Err: err}
}

// Nonces is the number of nonces held in the Verifier's own memory: zero
// when it has a Store.
func (v *Verifier) Nonces() int { return v.mem.Len() }

func (v *Verifier) clock() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// maxAhead is MaxAhead in whole seconds, at most the window.
func (v *Verifier) maxAhead() int64 {
	a := v.MaxAhead
	if a <= 0 {
		a = DefaultMaxAhead
	}
	return int64(min(a, v.window()) / time.Second)
}

func (v *Verifier) window() time.Duration {
	if v.Window > 0 {
		return v.Window
	}
	return DefaultWindow
}
