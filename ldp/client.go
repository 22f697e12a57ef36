package ldp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/delegateos/delegateos/internal/timestamp"
)

// Client is the initiator side of LDP over HTTP: it signs what it sends
// and checks what it gets back. The zero value sends unsigned envelopes
// and takes unsigned replies; set ID first.
type Client struct {
	// ID is this initiator's delegate ID, the from of what it sends.
	ID string
	// TrustDomain is this initiator's trust domain, sent in
	// SESSION_PROPOSE as the reference SDKs do.
	TrustDomain string
	// Key signs with the Ed25519 profile; else HMACSecret, if set, with
	// the reference's HMAC; else envelopes go unsigned.
	Key        ed25519.PrivateKey
	HMACSecret string
	// HTTP sends the requests; nil means a client with a 30 s timeout that
	// does not follow redirects.
	HTTP *http.Client
	// Verifier checks replies; nil means replies are not checked (and the
	// delegate's signature is not required).
	Verifier *Verifier
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Discover fetches and validates the identity card of the delegate at
// base (GET base/.well-known/ldp-identity): application/json, no
// redirect, at most MaxCardSize, ParseCard.
func (c *Client) Discover(ctx context.Context, base string) (*IdentityCard, error) {
	target, err := endpointURL(base, WellKnownPath)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", target, resp.Status)
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, fmt.Errorf("GET %s: Content-Type %q, want application/json", target, resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxCardSize+1))
	if err != nil {
		return nil, err
	}
	return ParseCard(body)
}

// endpointURL is base with path appended; base is an http or https URL.
func endpointURL(base, path string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q is not an http or https URL without user information, query or fragment", base)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawPath = ""
	return u.String(), nil
}

// prepare fills e's message ID, timestamp and nonce when empty, and signs it.
func (c *Client) prepare(e *Envelope) error {
	if e.MessageID == "" {
		e.MessageID = newSessionID()
	}
	if e.Timestamp == "" {
		e.Timestamp = timestamp.Format(c.now())
	}
	if e.Nonce == "" {
		e.Nonce = newNonce()
	}
	if e.From == "" {
		e.From = c.ID
	}
	if err := e.Check(); err != nil {
		return err
	}
	switch {
	case c.Key != nil:
		return SignEd25519(e, c.Key)
	case c.HMACSecret != "":
		SignHMAC(e, c.HMACSecret)
	}
	return nil
}

// ReplyError is a reply that is not one the initiator can take.
type ReplyError struct{ Detail string }

func (e *ReplyError) Error() string { return "ldp reply: " + e.Detail }

// Send signs e and posts it to the delegate at base; signer, when not
// empty, is the key that must sign the reply. bearer is sent as
// Authorization: Bearer when not empty. The reply must be addressed to
// c.ID, in reply's session, and pass c.Verifier. A nil reply with a nil
// error is a 202 (no reply).
func (c *Client) Send(ctx context.Context, base string, e *Envelope, bearer, signer string) (*Envelope, error) {
	return c.send(ctx, base, MessagesPath, e, bearer, signer, nil)
}

// Stream is Send through the stream endpoint: each TASK_UPDATE before the
// reply is checked as the reply is and passed to update.
func (c *Client) Stream(ctx context.Context, base string, e *Envelope, bearer, signer string, update func(*Envelope)) (*Envelope, error) {
	return c.send(ctx, base, StreamPath, e, bearer, signer, update)
}

func (c *Client) send(ctx context.Context, base, path string, e *Envelope, bearer, signer string, update func(*Envelope)) (*Envelope, error) {
	if err := c.prepare(e); err != nil {
		return nil, err
	}
	target, err := endpointURL(base, path)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusAccepted {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("POST %s: %s: %s", target, resp.Status, strings.TrimSpace(string(b)))
	}
	if update == nil {
		data, err := io.ReadAll(io.LimitReader(resp.Body, MaxEnvelopeSize+1))
		if err != nil {
			return nil, err
		}
		return c.check(ctx, data, signer)
	}
	return c.readStream(ctx, resp.Body, signer, update)
}

// readStream reads server-sent events: TASK_UPDATEs, then the reply.
func (c *Client) readStream(ctx context.Context, r io.Reader, signer string, update func(*Envelope)) (*Envelope, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxEnvelopeSize+16)
	var last *Envelope
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if last != nil {
			return nil, &ReplyError{"an event after the reply"}
		}
		e, err := c.check(ctx, []byte(data), signer)
		if err != nil {
			return nil, err
		}
		if _, ok := e.Body.(*TaskUpdate); ok {
			update(e)
			continue
		}
		last = e
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if last == nil {
		return nil, &ReplyError{"the stream ended without a reply"}
	}
	return last, nil
}

func (c *Client) check(ctx context.Context, data []byte, signer string) (*Envelope, error) {
	if len(data) > MaxEnvelopeSize {
		return nil, &ReplyError{"the reply is larger than 1 MiB"}
	}
	e, err := ParseEnvelope(data)
	if err != nil {
		return nil, err
	}
	if c.Verifier != nil {
		if _, err := c.Verifier.Verify(ctx, e, signer); err != nil {
			return nil, err
		}
	}
	if e.To != c.ID {
		return nil, &ReplyError{fmt.Sprintf("addressed to %q, not to %s", clip(e.To), c.ID)}
	}
	return e, nil
}

// ClientSession is a session an initiator opened.
type ClientSession struct {
	c *Client
	// Base is the delegate's URL; Peer its delegate ID; Signer the key
	// that signed its SESSION_ACCEPT (Ed25519), which must sign every
	// later reply.
	Base, Peer, Signer string
	ID                 string
	Payload            Negotiated
	// Bearer is sent with every request of the session when not empty.
	Bearer string
}

// SessionRejected is a SESSION_REJECT.
type SessionRejected struct{ Reject *SessionReject }

func (e *SessionRejected) Error() string {
	if e.Reject.Error != nil {
		return fmt.Sprintf("session rejected: %s: %s", e.Reject.Error.Code, e.Reject.Error.Message)
	}
	return "session rejected: " + e.Reject.Reason
}

// Open runs HELLO and SESSION_PROPOSE with the delegate peer at base and
// returns the session it accepted, or a *SessionRejected. token, when not
// nil, travels with the SESSION_PROPOSE; bearer with every request.
func (c *Client) Open(ctx context.Context, base, peer string, cfg SessionConfig, token *DelegateOSMember, bearer, signer string) (*ClientSession, error) {
	var modes []PayloadMode
	modes = append(modes, cfg.PreferredPayloadModes...)
	if len(modes) == 0 {
		modes = DefaultPreferredModes
	}
	hello := &Envelope{To: peer, Body: &Hello{DelegateID: c.ID, SupportedModes: modes}, PayloadMode: ModeText}
	reply, err := c.Send(ctx, base, hello, bearer, signer)
	if err != nil {
		return nil, err
	}
	if err := expect[*CapabilityManifest](reply, peer); err != nil {
		return nil, err
	}
	if cfg.TrustDomain == "" {
		cfg.TrustDomain = c.TrustDomain
	}
	propose := &Envelope{To: peer, Body: &SessionPropose{Config: cfg}, PayloadMode: ModeText, DelegateOS: token}
	reply, err = c.Send(ctx, base, propose, bearer, signer)
	if err != nil {
		return nil, err
	}
	if rej, ok := reply.Body.(*SessionReject); ok {
		return nil, &SessionRejected{rej}
	}
	if err := expect[*SessionAccept](reply, peer); err != nil {
		return nil, err
	}
	acc := reply.Body.(*SessionAccept)
	if reply.SessionID != acc.SessionID {
		return nil, &ReplyError{"SESSION_ACCEPT's envelope and body name different sessions"}
	}
	if !acc.NegotiatedMode.Implemented() || !containsMode(modes, acc.NegotiatedMode) && acc.NegotiatedMode != ModeText {
		return nil, &ReplyError{fmt.Sprintf("the delegate chose payload mode %s, which was not offered", acc.NegotiatedMode)}
	}
	if signer == "" && reply.SignatureAlgorithm == AlgEd25519 {
		signer = reply.Signer
	}
	return &ClientSession{c: c, Base: base, Peer: peer, Signer: signer, ID: acc.SessionID,
		Payload: Negotiated{Mode: acc.NegotiatedMode, Fallback: acc.FallbackChain}, Bearer: bearer}, nil
}

func expect[T Body](e *Envelope, peer string) error {
	if _, ok := e.Body.(T); !ok {
		var zero T
		if f, ok := e.Body.(*TaskFailed); ok {
			return &ReplyError{fmt.Sprintf("%s: %s", f.Error.Code, f.Error.Message)}
		}
		return &ReplyError{fmt.Sprintf("got %s, want %s", e.Body.Type(), zero.Type())}
	}
	if e.From != peer {
		return &ReplyError{fmt.Sprintf("the reply comes from %q, not %s", clip(e.From), peer)}
	}
	return nil
}

// Submit sends a TASK_SUBMIT in mode (the session's current mode when
// empty) and returns the TASK_RESULT or TASK_FAILED reply; with update
// set it streams, passing on each TASK_UPDATE. On a TASK_FAILED for a
// semantic frame that failed validation, the session's mode falls back as
// the delegate's did (§4.3): resubmit in s.Payload.Mode.
func (s *ClientSession) Submit(ctx context.Context, b *TaskSubmit, mode PayloadMode, token *DelegateOSMember, update func(*Envelope)) (*Envelope, error) {
	if mode == "" {
		mode = s.Payload.Mode
	}
	e := &Envelope{SessionID: s.ID, To: s.Peer, Body: b, PayloadMode: mode, DelegateOS: token}
	var reply *Envelope
	var err error
	if update != nil {
		reply, err = s.c.Stream(ctx, s.Base, e, s.Bearer, s.Signer, update)
	} else {
		reply, err = s.c.Send(ctx, s.Base, e, s.Bearer, s.Signer)
	}
	if err != nil {
		return nil, err
	}
	if reply == nil {
		return nil, &ReplyError{"no reply to TASK_SUBMIT"}
	}
	switch body := reply.Body.(type) {
	case *TaskResult:
		if body.TaskID != b.TaskID || reply.SessionID != s.ID || reply.From != s.Peer {
			return nil, &ReplyError{"the TASK_RESULT is for another task, session or delegate"}
		}
		if body.Provenance.ProducedBy != s.Peer {
			return nil, &ReplyError{fmt.Sprintf("the result's provenance names %q, not %s", clip(body.Provenance.ProducedBy), s.Peer)}
		}
		// An attestation the provenance names must be the delegate's
		// signed record of this very exchange.
		if _, err := VerifyResult(e, reply); err != nil {
			return nil, err
		}
	case *TaskFailed:
		if body.TaskID != b.TaskID {
			return nil, &ReplyError{"the TASK_FAILED is for another task"}
		}
		if body.Error.Code == CodeFrameInvalid && mode == s.Payload.Mode {
			s.Payload.FallBack()
		}
	default:
		return nil, &ReplyError{fmt.Sprintf("got %s in reply to TASK_SUBMIT", reply.Body.Type())}
	}
	return reply, nil
}

// Close sends SESSION_CLOSE.
func (s *ClientSession) Close(ctx context.Context, reason string) error {
	e := &Envelope{SessionID: s.ID, To: s.Peer, Body: &SessionClose{Reason: &reason}, PayloadMode: ModeText}
	reply, err := s.c.Send(ctx, s.Base, e, s.Bearer, s.Signer)
	if err != nil {
		return err
	}
	if reply == nil {
		return nil
	}
	if f, ok := reply.Body.(*TaskFailed); ok {
		return errors.New(f.Error.Code + ": " + f.Error.Message)
	}
	return nil
}

// Send sends another message of the session (TASK_CANCEL, ATTESTATION).
func (s *ClientSession) Send(ctx context.Context, b Body) (*Envelope, error) {
	e := &Envelope{SessionID: s.ID, To: s.Peer, Body: b, PayloadMode: ModeText}
	return s.c.Send(ctx, s.Base, e, s.Bearer, s.Signer)
}
