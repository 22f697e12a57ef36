package serve

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/avpsig"
)

// Options configures a Server. The zero value of every field but Relay
// is a safe default.
type Options struct {
	// Relay runs one MCP session's relay: it reads the client's frames
	// from in until EOF and writes frames for the client to out, as
	// proxy.Run does, and returns when the session is over (a
	// *proxy.UpstreamExitError when its upstream died). Required.
	Relay func(ctx context.Context, s *Session, in io.Reader, out io.Writer) error
	// Endpoint is the MCP endpoint's path; "" means "/mcp".
	Endpoint string
	// Listen is the address the server listens on, for the Host check;
	// "" means 127.0.0.1.
	Listen string
	// AllowHosts adds names the Host header may carry ("*": any); the
	// loopback names, or the listen address, are always allowed.
	AllowHosts []string
	// AllowOrigins adds exact origins (scheme://host[:port]) browsers may
	// send requests from, besides those on an allowed host.
	AllowOrigins []string
	// MaxBodyBytes bounds one POST body; zero means DefaultMaxBodyBytes.
	// A request with no session and no token that CheckToken verified
	// gets at most UnauthenticatedBodyBytes.
	MaxBodyBytes int64
	// MaxBodyBytesInFlight bounds the bytes of request bodies being read
	// and held at once across the server (each counted at its declared
	// length, or its limit when it declares none): a request that gets no
	// share within a second is refused 503 unread, and requests without a
	// credential share an eighth of it and do not wait. The bodies of one
	// credential (its token's delegation tree, or the canonical token) hold
	// at most a quarter of it: beyond, a request is refused 503 at once,
	// and a body over a quarter is refused 413. Zero means
	// DefaultMaxBodyBytesInFlight or 4 × MaxBodyBytes, whichever is larger;
	// less than MaxBodyBytes is an error.
	MaxBodyBytesInFlight int64
	// MaxSessions bounds the sessions open at once; zero means 256.
	MaxSessions int
	// MaxCredentialSessions bounds the sessions open at once with one
	// client token, and MaxTreeSessions those whose tokens share a
	// delegation tree (SessionTree), so that one token holder cannot take
	// every session; zero means 16 and 64, negative no bound. A session
	// whose client sends no token (it runs with the server's default
	// token) is bound by MaxSessions only.
	MaxCredentialSessions, MaxTreeSessions int
	// SessionTree, when set, names the delegation tree of a token that
	// CheckToken accepted (its root block, say: what a token holder
	// cannot multiply); "" puts the token in no tree.
	SessionTree func(token string) string
	// SessionCredential, when set, names the credential of a token that
	// CheckToken accepted in one canonical spelling (the token itself,
	// whatever wrapper or whitespace the client sent it in): what
	// MaxCredentialSessions and the per-credential body share count by.
	// Unset, the token text is the credential.
	SessionCredential func(token string) string
	// SessionLive, when set, reports whether the token a session's client
	// presented still authorizes anything: an error (it was revoked, it
	// expired, its delegation ended) closes the session and stops its
	// upstream. It runs on each request of the session, on every
	// session each RecheckInterval, and on Recheck.
	SessionLive func(token string) error
	// RecheckInterval is how often every session's token is checked with
	// SessionLive; zero means 30 seconds.
	RecheckInterval time.Duration
	// MaxCalls bounds the requests in flight across all sessions, and
	// MaxSessionCalls those of one session; zero means 1024 and 64.
	MaxCalls, MaxSessionCalls int
	// IdleTimeout is how long a session may go without a request before it
	// and its upstream are reaped (with requests in flight, without a
	// request and without a client reading any of its streams: those
	// requests are cancelled); zero means 10 minutes.
	IdleTimeout time.Duration
	// AbandonTimeout is how long a session may go with no stream of its
	// client's open (no GET stream, no POST being answered) and no
	// request before it and its upstream are reaped: a client that went
	// away without DELETE (the TypeScript SDK's close() and the
	// Inspector send none) leaves its upstream for this long, not
	// IdleTimeout. A client that keeps its GET stream open is not
	// touched. Zero means DefaultAbandonTimeout; negative turns it off.
	AbandonTimeout time.Duration
	// CheckToken, when set, verifies the token of a session's
	// Authorization header when the session starts; an error refuses the
	// initialize with 401. The gate verifies the token again on every
	// call, whatever this says.
	CheckToken func(token string) error
	// RequireToken refuses (401) a session, or a stateless request, whose
	// client sends no Authorization: Bearer token: each session starts an
	// upstream, which a client with no token must not be able to make the
	// server do. Set it when sessions have no default token.
	RequireToken bool
	// Authorize, when set, runs on every MCP request (POST, GET, DELETE)
	// after the transport's own checks and before anything reaches a
	// session's relay: body is the POST body (nil otherwise) and s the
	// session (nil for the initialize that creates one). An error refuses
	// the request: with the HTTP status of an error that has a
	// StatusCode() int method, else 403; its text is the answer's message.
	Authorize func(r *http.Request, body []byte, s *Session) error
	// AuthorizeVerifiesSignatures says Authorize verifies every AVP-Sig
	// signature a request carries (against its token's holder). When it
	// is false, the server verifies an AVP-Sig in Authorization itself,
	// against the key its own did:key names (signature, timestamp window,
	// nonce), before taking that DID as the credential a session is bound
	// to: a DID is public, so a header naming it proves nothing unchecked.
	AuthorizeVerifiesSignatures bool
	// JSONResponses answers a request whose response is the only message
	// the upstream sends for it with an application/json body instead of
	// an SSE stream. The stream (the default, as in the reference SDKs)
	// has event ids from its first byte, so a client that loses the
	// connection can resume it; a JSON body cannot be resumed.
	JSONResponses bool
	// ReadTimeout bounds reading a request's headers, and separately its
	// body, so slow clients cannot hold connections; zero means 10s.
	ReadTimeout time.Duration
	// UpstreamReady, when set, says whether the upstream can be reached
	// now: GET /readyz answers 503 while it cannot. It is called at most
	// once a second (the answer is reused in between, so probes from
	// strangers cost the upstream nothing more), with a 2s deadline.
	UpstreamReady func(ctx context.Context) error
	// Log receives lifecycle lines; nil discards.
	Log *zap.Logger
}

// DefaultMaxBodyBytes is the default bound on one POST body, and
// DefaultMaxBodyBytesInFlight on the bytes of all the bodies held at once.
const (
	DefaultMaxBodyBytes         = 4 << 20
	DefaultMaxBodyBytesInFlight = 64 << 20
)

// MaxConcurrentStreams bounds the requests an HTTP/2 connection carries at
// once: a client cannot have one connection run any number of handlers.
const MaxConcurrentStreams = 32

// Server is the Streamable HTTP front. Mux serves the MCP endpoint,
// /healthz and /readyz; mount other handlers on it before serving.
type Server struct {
	// Mux routes every request the server gets.
	Mux *http.ServeMux

	opts Options
	// sigs verifies AVP-Sig in Authorization when Authorize does not.
	sigs  avpsig.Verifier
	log   *zap.Logger
	hosts *hostPolicy
	ctx   context.Context
	stop  context.CancelFunc

	mu       sync.Mutex
	sessions map[string]*session
	// stateless holds, by credential, the session that serves requests of
	// the stateless style of MCP 2026-07-28 (no Mcp-Session-Id): such
	// requests stand alone, so those with one credential share one relay
	// and one upstream.
	stateless map[[32]byte]*session
	draining  bool

	bodies *byteBudget // MaxBodyBytesInFlight
	// budgetWarned is when a refusal for want of body room was last logged.
	budgetWarned atomic.Int64
	calls        atomic.Int64 // requests in flight
	// ready is UpstreamReady's last answer and when it was asked.
	readyMu  sync.Mutex
	readyAt  time.Time
	readyErr error
	restarts atomic.Int64 // sessions whose upstream died
	idle     chan struct{}
	wg       sync.WaitGroup // running sessions
}

// New returns a server for opts.
func New(opts Options) (*Server, error) {
	if opts.Relay == nil {
		return nil, errors.New("serve: no relay")
	}
	if opts.Endpoint == "" {
		opts.Endpoint = "/mcp"
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	switch {
	case opts.MaxBodyBytesInFlight <= 0:
		opts.MaxBodyBytesInFlight = max(DefaultMaxBodyBytesInFlight, 4*opts.MaxBodyBytes)
	case opts.MaxBodyBytesInFlight < opts.MaxBodyBytes:
		return nil, fmt.Errorf("serve: the bytes of bodies in flight (%d) must be at least the largest body (%d)", opts.MaxBodyBytesInFlight, opts.MaxBodyBytes)
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 256
	}
	if opts.MaxCredentialSessions == 0 {
		opts.MaxCredentialSessions = DefaultMaxCredentialSessions
	}
	if opts.MaxTreeSessions == 0 {
		opts.MaxTreeSessions = DefaultMaxTreeSessions
	}
	if opts.RecheckInterval <= 0 {
		opts.RecheckInterval = DefaultRecheckInterval
	}
	if opts.MaxCalls <= 0 {
		opts.MaxCalls = 1024
	}
	if opts.MaxSessionCalls <= 0 {
		opts.MaxSessionCalls = 64
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = 10 * time.Second
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 10 * time.Minute
	}
	if opts.AbandonTimeout == 0 {
		opts.AbandonTimeout = DefaultAbandonTimeout
	}
	log := opts.Log
	if log == nil {
		log = zap.NewNop()
	}
	listenHost := "127.0.0.1"
	if opts.Listen != "" {
		h, _, err := net.SplitHostPort(opts.Listen)
		if err != nil {
			return nil, err
		}
		listenHost = h
	}
	s := &Server{
		Mux: http.NewServeMux(), opts: opts, log: log,
		hosts:     newHostPolicy(listenHost, opts.AllowHosts, opts.AllowOrigins),
		sessions:  map[string]*session{},
		stateless: map[[32]byte]*session{},
		idle:      make(chan struct{}, 1),
		bodies:    newByteBudget(opts.MaxBodyBytesInFlight),
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	s.Mux.Handle(opts.Endpoint, http.HandlerFunc(s.serveMCP))
	s.Mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	s.Mux.HandleFunc("GET /readyz", s.serveReady)
	go s.reap()
	go s.recheckEvery(opts.RecheckInterval)
	return s, nil
}

// HTTPServer is an http.Server for s with the limits the front needs:
// bounded headers, and time limits on reading them and on reading each
// request's body, whatever serves it (slow clients cannot hold
// connections open before a request is read); an HTTP/2 connection
// carries at most MaxConcurrentStreams requests at once.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.boundReads(s.Mux),
		ReadHeaderTimeout: s.opts.ReadTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          zap.NewStdLog(s.log),
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: MaxConcurrentStreams},
	}
}

// MaxHeaderBytes bounds a request's headers.
const MaxHeaderBytes = 32 << 10

func (s *Server) serveReady(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	draining, n := s.draining, len(s.sessions)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	switch {
	case draining:
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "draining\n")
	case n >= s.opts.MaxSessions:
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "at the session limit\n")
	case s.upstreamReady() != nil:
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "the upstream cannot be reached\n")
	default:
		io.WriteString(w, "ready\n")
	}
}

// upstreamReady is Options.UpstreamReady's answer, asked at most once a
// second; a change is logged (the probe's reason is not told to the
// unauthenticated caller of /readyz).
func (s *Server) upstreamReady() error {
	if s.opts.UpstreamReady == nil {
		return nil
	}
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	if !s.readyAt.IsZero() && time.Since(s.readyAt) < time.Second {
		return s.readyErr
	}
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
	defer cancel()
	err := s.opts.UpstreamReady(ctx)
	switch {
	case err != nil && (s.readyErr == nil || s.readyAt.IsZero()):
		s.log.Warn("not ready: the upstream cannot be reached", zap.Error(err))
	case err == nil && s.readyErr != nil:
		s.log.Info("ready: the upstream can be reached again")
	}
	s.readyAt, s.readyErr = time.Now(), err
	return err
}

// Sessions is the number of open sessions.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// InFlight is the number of requests in flight.
func (s *Server) InFlight() int64 { return s.calls.Load() }

// UpstreamRestarts is the number of sessions that ended because their
// upstream exited (each new session starts a new upstream).
func (s *Server) UpstreamRestarts() int64 { return s.restarts.Load() }

var (
	errServerBusy  = errors.New("too many requests in flight on this server")
	errSessionBusy = errors.New("too many requests in flight in this session")
)

func (s *Server) callBegin() bool {
	if s.calls.Add(1) > int64(s.opts.MaxCalls) {
		s.calls.Add(-1)
		return false
	}
	return true
}

func (s *Server) callDone() {
	if s.calls.Add(-1) == 0 {
		select {
		case s.idle <- struct{}{}:
		default:
		}
	}
}

func (s *Server) upstreamCrashed() { s.restarts.Add(1) }

// newSession starts a session for a client presenting the credential
// auth (see credential; its token, if a bearer one, is token).
func (s *Server) newSession(auth, token string, stateless, front bool) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return nil, errDraining
	}
	cred := sha256.Sum256([]byte(auth))
	if front {
		// The LDP front's stateless session of a credential is its own.
		cred = sha256.Sum256([]byte("delegateos/ldp-front\x00" + auth))
	}
	if stateless {
		// A relay that is closing (reaped) takes no more requests: the
		// next stateless client of its credential gets a new one, which
		// replaces it here.
		if sess := s.stateless[cred]; sess != nil && sess.taking() {
			return sess, nil
		}
	}
	if len(s.sessions) >= s.opts.MaxSessions {
		return nil, errTooManySessions
	}
	tree := ""
	if token != "" && s.opts.SessionTree != nil {
		tree = s.opts.SessionTree(token)
	}
	credKey := s.credentialKey(token)
	if err := s.overCaps(tree, credKey); err != nil {
		return nil, err
	}
	sess := &session{
		Session:  Session{ID: newSessionID(), Token: token, LDPFront: front},
		srv:      s,
		cred:     cred,
		tree:     tree,
		credKey:  credKey,
		shared:   stateless,
		routes:   map[string]*stream{},
		progress: map[string]*stream{},
		streams:  map[int64]*stream{},
		last:     time.Now(),
		done:     make(chan struct{}),
	}
	sess.log = s.log.With(zap.String("session", sess.ID[:8]))
	s.sessions[sess.ID] = sess
	if stateless {
		s.stateless[cred] = sess
	}
	s.wg.Add(1)
	sess.start(s.ctx)
	sess.log.Info("session started")
	return sess, nil
}

var (
	errDraining        = errors.New("the server is shutting down")
	errTooManySessions = errors.New("too many sessions open")
)

func (s *Server) lookup(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

func (s *Server) forget(sess *session) {
	s.mu.Lock()
	if s.sessions[sess.ID] == sess {
		delete(s.sessions, sess.ID)
	}
	if sess.shared && s.stateless[sess.cred] == sess {
		delete(s.stateless, sess.cred)
	}
	s.mu.Unlock()
	s.wg.Done()
}

// DefaultAbandonTimeout is Options.AbandonTimeout's default: a laptop
// whose client restarts a few times an hour keeps no more than a minute's
// worth of forgotten upstreams (an npx server holds ~130 MB), and a client
// without a GET stream that pauses longer starts a new session (the 404
// tells it to).
const DefaultAbandonTimeout = time.Minute

// reap closes sessions idle for longer than IdleTimeout (with no request
// in flight), and sessions abandoned for longer than AbandonTimeout (or
// IdleTimeout, if that is shorter or it is off): no request, and no stream
// of the client's open, so no client is there, with or without requests
// in flight (closing the session cancels them, charged what they
// reserved).
func (s *Server) reap() {
	abandon := s.opts.IdleTimeout
	if s.opts.AbandonTimeout > 0 {
		abandon = min(abandon, s.opts.AbandonTimeout)
	}
	tick := time.NewTicker(min(s.opts.IdleTimeout/4, abandon/4, time.Minute))
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-tick.C:
			s.mu.Lock()
			var idle, abandoned []*session
			for _, sess := range s.sessions {
				sess.mu.Lock()
				switch {
				case sess.abandonedSince(now.Add(-abandon)):
					abandoned = append(abandoned, sess)
				case sess.inflight == 0 && now.Sub(sess.last) > s.opts.IdleTimeout:
					idle = append(idle, sess)
				}
				sess.mu.Unlock()
			}
			s.mu.Unlock()
			for _, sess := range abandoned {
				sess.close("the session's client had no stream open and sent nothing for " + abandon.String())
			}
			for _, sess := range idle {
				sess.close("the session was idle for longer than " + s.opts.IdleTimeout.String())
			}
		}
	}
}

// Drain stops taking new sessions and requests (a session's notifications
// and its answers to the upstream's requests still go through, so calls in
// flight can finish), waits until no request is in flight or ctx is done,
// then closes every session (each relay settles the calls still open and
// shuts its upstream down) and waits for them to end.
func (s *Server) Drain(ctx context.Context) {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	s.log.Info("draining", zap.Int64("in_flight", s.calls.Load()))
	for s.calls.Load() > 0 {
		select {
		case <-s.idle:
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			s.log.Warn("drain time is up with requests in flight; their sessions are closed and the calls settled as charged", zap.Int64("in_flight", s.calls.Load()))
			goto closeAll
		}
	}
closeAll:
	s.mu.Lock()
	all := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		all = append(all, sess)
	}
	s.mu.Unlock()
	// At once: closing one waits a little for its relay to take the
	// cancellations of its calls in flight.
	for _, sess := range all {
		go sess.close("the server is shutting down")
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(stopGrace):
		// An upstream that does not exit when its input closes (each relay
		// gives it its own grace) is killed with the server's context.
		s.log.Warn("sessions still running after their input closed; stopping their upstreams")
	}
	s.stop()
	<-done
}

// stopGrace is how long Drain waits for closed sessions to end before it
// kills what is left.
const stopGrace = 10 * time.Second
