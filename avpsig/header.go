package avpsig

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Scheme is the Authorization scheme of an AVP signature.
const Scheme = "AVP-Sig"

// CoveredHeader names the header in which Sign repeats what it signed; see
// the package documentation.
const CoveredHeader = "AVP-Sig-Covered"

// SignatureHeader is the header delegateos clients send the signature in:
// an AVP-Sig value, as AVP sends in Authorization. Authorization stays
// free for a bearer token (delegateos serve takes the session's token
// there).
const SignatureHeader = "AVP-Signature"

// ErrNotAVPSig is wrapped by ParseHeader when the value is not of the
// AVP-Sig scheme at all (another Authorization scheme).
var ErrNotAVPSig = errors.New("not an AVP-Sig authorization")

// Header is a parsed AVP-Sig v2 Authorization value. Its fields are as the
// client wrote them: nothing in it has been verified.
type Header struct {
	// DID is the signer's did:key.
	DID string
	// TS is the signing time in Unix seconds.
	TS int64
	// Nonce is 32 lower-case hex characters.
	Nonce string
	// Sig is the 64-byte Ed25519 signature.
	Sig []byte
}

// String formats the header as an Authorization value.
func (h Header) String() string {
	return fmt.Sprintf(`%s v="2",did="%s",ts="%d",nonce="%s",sig="%s"`, Scheme, h.DID, h.TS, h.Nonce, hex.EncodeToString(h.Sig))
}

// ParseHeader parses an Authorization value of the AVP-Sig scheme, version
// 2. It is strict: the scheme (any case) and one space, then the
// parameters v, did, ts, nonce and sig, each exactly once, in any order,
// separated by commas with optional spaces, every value in double quotes
// without escapes; v must be "2", ts decimal Unix seconds, nonce 32
// lower-case hex characters, sig 128 hex characters. Unknown parameters are
// refused.
func ParseHeader(v string) (Header, error) {
	var h Header
	if len(v) > MaxHeaderLen {
		return h, fmt.Errorf("authorization is %d bytes, over the limit of %d", len(v), MaxHeaderLen)
	}
	scheme, rest, ok := strings.Cut(v, " ")
	if !strings.EqualFold(scheme, Scheme) {
		return h, fmt.Errorf("%w: scheme %q", ErrNotAVPSig, clip(scheme))
	}
	if !ok {
		return h, errors.New("AVP-Sig without parameters")
	}
	params, err := parseParams(rest, []string{"v", "did", "ts", "nonce", "sig"})
	if err != nil {
		return h, err
	}
	switch ver, ok := params["v"]; {
	case !ok:
		return h, errors.New(`AVP-Sig v1 (no v="2") does not cover the query and is not accepted`)
	case ver != "2":
		return h, fmt.Errorf("AVP-Sig version %q is not supported (want 2)", clip(ver))
	}
	for _, k := range []string{"did", "ts", "nonce", "sig"} {
		if _, ok := params[k]; !ok {
			return h, fmt.Errorf("AVP-Sig has no %s", k)
		}
	}
	h.DID = params["did"]
	if !strings.HasPrefix(h.DID, "did:key:") {
		return h, fmt.Errorf("did %q is not a did:key", clip(h.DID))
	}
	ts := params["ts"]
	if ts == "" || len(ts) > maxTSLen || strings.Trim(ts, "0123456789") != "" || (len(ts) > 1 && ts[0] == '0') {
		return h, fmt.Errorf("ts %q is not Unix seconds", clip(ts))
	}
	h.TS, _ = strconv.ParseInt(ts, 10, 64) // at most 12 digits: cannot fail
	h.Nonce = params["nonce"]
	if len(h.Nonce) != nonceLen || strings.Trim(h.Nonce, "0123456789abcdef") != "" {
		return h, fmt.Errorf("nonce %q is not %d lower-case hex characters", clip(h.Nonce), nonceLen)
	}
	s := params["sig"]
	if len(s) != 128 {
		return h, fmt.Errorf("sig is %d characters, want 128 hex", len(s))
	}
	if h.Sig, err = hex.DecodeString(s); err != nil {
		return h, fmt.Errorf("sig is not hex")
	}
	return h, nil
}

// Covered is what a client says it signed: the canonical query and the hex
// SHA-256 of the body. It is read only to explain a failed signature.
type Covered struct {
	Query, BodySHA256 string
}

// String formats the value of the AVP-Sig-Covered header.
func (c Covered) String() string {
	return fmt.Sprintf(`query="%s",body-sha256="%s"`, c.Query, c.BodySHA256)
}

// ParseCovered parses an AVP-Sig-Covered value, as strictly as ParseHeader.
func ParseCovered(v string) (Covered, error) {
	if len(v) > MaxHeaderLen {
		return Covered{}, fmt.Errorf("%s is %d bytes, over the limit of %d", CoveredHeader, len(v), MaxHeaderLen)
	}
	params, err := parseParams(v, []string{"query", "body-sha256"})
	if err != nil {
		return Covered{}, err
	}
	q, okq := params["query"]
	b, okb := params["body-sha256"]
	if !okq || !okb {
		return Covered{}, fmt.Errorf("%s needs query and body-sha256", CoveredHeader)
	}
	if len(b) != 64 || strings.Trim(b, "0123456789abcdef") != "" {
		return Covered{}, fmt.Errorf("%s body-sha256 is not 64 lower-case hex characters", CoveredHeader)
	}
	return Covered{Query: q, BodySHA256: b}, nil
}

// parseParams reads key="value" pairs separated by commas with optional
// spaces or tabs around them; only the given keys, each once.
func parseParams(s string, keys []string) (map[string]string, error) {
	params := make(map[string]string, len(keys))
	for {
		s = strings.TrimLeft(s, " \t")
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, fmt.Errorf("parameter %q is not key=\"value\"", clip(s))
		}
		key := s[:eq]
		known := false
		for _, k := range keys {
			known = known || k == key
		}
		if !known {
			return nil, fmt.Errorf("unknown parameter %q", clip(key))
		}
		if _, dup := params[key]; dup {
			return nil, fmt.Errorf("parameter %q given twice", key)
		}
		s = s[eq+1:]
		if len(s) == 0 || s[0] != '"' {
			return nil, fmt.Errorf("parameter %q: value is not in double quotes", key)
		}
		end := strings.IndexByte(s[1:], '"')
		if end < 0 {
			return nil, fmt.Errorf("parameter %q: unterminated value", key)
		}
		val := s[1 : 1+end]
		if strings.ContainsAny(val, "\\\r\n") {
			return nil, fmt.Errorf("parameter %q: escapes and line breaks are not allowed", key)
		}
		params[key] = val
		s = strings.TrimLeft(s[2+end:], " \t")
		if s == "" {
			return params, nil
		}
		if s[0] != ',' {
			return nil, fmt.Errorf("parameter %q: expected a comma after the value", key)
		}
		s = s[1:]
	}
}
