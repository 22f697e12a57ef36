package avpsig

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/delegateos/delegateos/identity"
)

// Message returns the text an AVP-Sig v2 signature is made over:
// v2:{method}:{path}:{canonicalQuery}:{ts}:{nonce}:{bodySHA256}, with
// bodySHA256 in lower-case hex.
func Message(method, path, canonicalQuery string, ts int64, nonce, bodySHA256 string) []byte {
	b := make([]byte, 0, 16+len(method)+len(path)+len(canonicalQuery)+len(nonce)+len(bodySHA256)+maxTSLen)
	b = append(b, "v2:"...)
	b = append(b, method...)
	b = append(b, ':')
	b = append(b, path...)
	b = append(b, ':')
	b = append(b, canonicalQuery...)
	b = append(b, ':')
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, ':')
	b = append(b, nonce...)
	b = append(b, ':')
	return append(b, bodySHA256...)
}

// BodySHA256 is the lower-case hex SHA-256 of a request body.
func BodySHA256(body []byte) string {
	d := sha256.Sum256(body)
	return hex.EncodeToString(d[:])
}

// Signed is what Sign produces: the AVP-Sig value (for SignatureHeader,
// or Authorization) and the value of the AVP-Sig-Covered header.
type Signed struct {
	Signature string
	Covered   string
}

// Sign signs a request with key: its method, its path as sent (escaped, as
// in the request line), its raw query (after "?"), its body and the time
// now. The nonce is read from rand (crypto/rand when nil).
func Sign(key ed25519.PrivateKey, method, path, rawQuery string, body []byte, now time.Time, rnd io.Reader) (Signed, error) {
	if len(key) != ed25519.PrivateKeySize {
		return Signed{}, fmt.Errorf("signing key is %d bytes, want %d", len(key), ed25519.PrivateKeySize)
	}
	q, err := CanonicalQuery(rawQuery)
	if err != nil {
		return Signed{}, err
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	var nb [nonceLen / 2]byte
	if _, err := io.ReadFull(rnd, nb[:]); err != nil {
		return Signed{}, fmt.Errorf("nonce: %w", err)
	}
	h := Header{
		DID:   identity.DIDFromPublicKey(key.Public().(ed25519.PublicKey)),
		TS:    now.Unix(),
		Nonce: hex.EncodeToString(nb[:]),
	}
	bh := BodySHA256(body)
	h.Sig = ed25519.Sign(key, Message(method, path, q, h.TS, h.Nonce, bh))
	return Signed{Signature: h.String(), Covered: Covered{Query: q, BodySHA256: bh}.String()}, nil
}

// SignRequest signs req with key at the current time and sets its
// SignatureHeader and AVP-Sig-Covered headers. It reads the body and puts
// back an identical one.
func SignRequest(req *http.Request, key ed25519.PrivateKey) error {
	return signRequest(req, key, SignatureHeader)
}

func signRequest(req *http.Request, key ed25519.PrivateKey, header string) error {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return fmt.Errorf("read request body: %w", err)
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	if req.URL == nil {
		return errors.New("request has no URL")
	}
	path := req.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	s, err := Sign(key, req.Method, path, req.URL.RawQuery, body, time.Now(), nil)
	if err != nil {
		return err
	}
	req.Header.Set(header, s.Signature)
	req.Header.Set(CoveredHeader, s.Covered)
	return nil
}

// Transport is an http.RoundTripper that signs every request with Key
// before passing it to Base (http.DefaultTransport when nil). It signs a
// clone, so the caller's request is left as it was.
type Transport struct {
	Key  ed25519.PrivateKey
	Base http.RoundTripper
	// Header is the header the signature goes in; empty means
	// SignatureHeader. An AVP server wants Authorization.
	Header string
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody != nil {
			b, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r.Body = b
		}
		// Without GetBody the clone shares the one body, which SignRequest
		// consumes and replaces on the clone.
	}
	header := t.Header
	if header == "" {
		header = SignatureHeader
	}
	if err := signRequest(r, t.Key, header); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}
