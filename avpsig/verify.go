package avpsig

import (
	"crypto/ed25519"
	"fmt"
	"net/http"
	"strings"
	"sync"
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
)

// Error is a refused signature.
type Error struct {
	Reason Reason
	Detail string
}

func (e *Error) Error() string { return string(e.Reason) + ": " + e.Detail }

func refuse(r Reason, format string, args ...any) *Error {
	return &Error{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// Verifier checks AVP-Sig v2 signatures and remembers their nonces. The
// zero value is ready to use with the defaults. It is safe for concurrent
// use.
type Verifier struct {
	// Window is how far a timestamp may lie from now, either way; zero
	// means DefaultWindow.
	Window time.Duration
	// MaxNonces bounds the nonces held; zero means DefaultMaxNonces.
	MaxNonces int
	// MaxNoncesPerSigner bounds the nonces held for one signer's key, so
	// that one signer cannot take them all; zero means
	// DefaultMaxNoncesPerSigner.
	MaxNoncesPerSigner int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Header is the request header Verify reads the signature from; empty
	// means SignatureHeader or Authorization (where AVP puts it; other
	// schemes there, such as Bearer, are left alone): a request must carry
	// exactly one AVP-Sig value in them.
	Header string

	mu sync.Mutex
	// nonces maps signer key + nonce to the Unix second after which it
	// can no longer be replayed (its ts plus the window).
	nonces    map[string]int64
	lastSweep int64
	// perSigner counts the nonces held for each signer's key.
	perSigner map[string]int
}

// Verify checks the signature of r, whose body the caller has read into
// body, against signer (a did:key or principal ID: for a delegation token,
// its current delegatee). A nil error means the request is accepted and
// its nonce now spent; otherwise the error is an *Error.
func (v *Verifier) Verify(r *http.Request, body []byte, signer string) error {
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
	return v.VerifyParts(r.Method, path, r.URL.RawQuery, sigs, r.Header.Values(CoveredHeader), body, signer)
}

// VerifyParts is Verify given the parts of a request: every AVP-Sig value
// and every AVP-Sig-Covered value it carries.
func (v *Verifier) VerifyParts(method, path, rawQuery string, signatures, covered []string, body []byte, signer string) error {
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
	now := v.now()
	win := int64(v.window() / time.Second)
	if h.TS < now-win || h.TS > now+win {
		return refuse(ReasonStale, "signed at %d, %d s from the verifier's clock (%d); the window is %d s", h.TS, h.TS-now, now, win)
	}
	q, err := CanonicalQuery(rawQuery)
	if err != nil {
		return refuse(ReasonMalformed, "%v", err)
	}
	bh := BodySHA256(body)
	if !ed25519.Verify(pub, Message(method, path, q, h.TS, h.Nonce, bh), h.Sig) {
		return explain(pub, h, method, path, q, bh, covered)
	}
	return v.spend(pub, h, now, win)
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

// spend records the nonce of a verified signature, refusing a replay.
func (v *Verifier) spend(pub ed25519.PublicKey, h Header, now, win int64) error {
	key := string(pub) + h.Nonce
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.nonces == nil {
		v.nonces = map[string]int64{}
	}
	if _, seen := v.nonces[key]; seen {
		return refuse(ReasonReplayed, "nonce %s was already used by %s", h.Nonce, h.DID)
	}
	max := v.MaxNonces
	if max <= 0 {
		max = DefaultMaxNonces
	}
	if now != v.lastSweep || len(v.nonces) >= max {
		v.sweep(now)
	}
	if len(v.nonces) >= max {
		return refuse(ReasonBusy, "%d nonces are live, the most this verifier holds; retry later", len(v.nonces))
	}
	perMax := v.MaxNoncesPerSigner
	if perMax <= 0 {
		perMax = DefaultMaxNoncesPerSigner
	}
	signer := string(pub)
	if v.perSigner[signer] >= perMax {
		return refuse(ReasonBusy, "%d nonces of %s are live, the most this verifier holds for one signer; retry later", v.perSigner[signer], h.DID)
	}
	if v.perSigner == nil {
		v.perSigner = map[string]int{}
	}
	v.perSigner[signer]++
	v.nonces[key] = h.TS + win
	return nil
}

// sweep forgets nonces whose timestamps have left the window: those can no
// longer be replayed, since their signatures are now stale.
func (v *Verifier) sweep(now int64) {
	v.lastSweep = now
	for k, until := range v.nonces {
		if until < now {
			delete(v.nonces, k)
			signer := k[:ed25519.PublicKeySize]
			if v.perSigner[signer]--; v.perSigner[signer] <= 0 {
				delete(v.perSigner, signer)
			}
		}
	}
}

// Nonces is the number of nonces held.
func (v *Verifier) Nonces() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.nonces)
}

func (v *Verifier) now() int64 {
	if v.Now != nil {
		return v.Now().Unix()
	}
	return time.Now().Unix()
}

func (v *Verifier) window() time.Duration {
	if v.Window > 0 {
		return v.Window
	}
	return DefaultWindow
}
