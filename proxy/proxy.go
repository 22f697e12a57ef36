package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/receipt"
)

// Config configures a proxy session.
type Config struct {
	// Upstream is the MCP server's command and arguments.
	Upstream []string
	// UpstreamConn, when set, is the upstream instead of a command
	// (Upstream and PrepareUpstream are then not used): an MCP server the
	// relay reaches some other way, relayed and gated the same. A signal
	// from Signals ends it, as termination does.
	UpstreamConn UpstreamConn
	// Gate decides tools/call; required unless Gates is set.
	Gate *gate.Gate
	// Gates, when set, is where each request takes the snapshot that
	// decides it (a reload swaps it): Gate and Delegations are then not
	// used. A request keeps the snapshot it was decided by until it is
	// settled.
	Gates *gate.Current
	// Delegations answers the delegateos/ messages (§9); nil answers them
	// with an error. They are never forwarded upstream.
	Delegations *gate.Delegations
	// SessionToken is the DCT used when a call carries none, and whose view
	// tools/list shows. Empty: calls must carry their own, and tools/list
	// shows the view of the last token a call was allowed with.
	SessionToken string
	// MaxFrameBytes limits one message; zero means DefaultMaxFrameBytes.
	MaxFrameBytes int
	// Log receives one line per decision and lifecycle event; nil discards.
	// The fields of the per-call lines are passed in storage the relay
	// reuses, so a zapcore.Core that keeps fields after Write returns must
	// copy them (as zaptest/observer does; encoding cores keep nothing).
	Log *zap.Logger
	// Signals are passed on to the upstream.
	Signals <-chan os.Signal
	// ShutdownGrace is how long the upstream gets to exit after its stdin
	// is closed before it is terminated; zero means 5s.
	ShutdownGrace time.Duration
	// PrepareUpstream, when set, adjusts the upstream's command before it
	// starts (its user, say); an error stops Run before anything starts.
	PrepareUpstream func(*exec.Cmd) error
	// Observe is a dry run of the gate: every decision is made and logged
	// as usual, but a refused request is forwarded anyway (its line says
	// "enforced": false, and it is charged nothing) and lists are not
	// filtered (a line names what would have been hidden). Requests the
	// relay cannot read unambiguously are still refused. Never the default.
	Observe bool
	// ApprovalElsewhere, when set, is why no client of this relay is asked
	// to approve a call a rule holds for approval: the server's approvals
	// are answered by others (its LDP approvers, through its LDP front's
	// own relay). Such a call is refused approval_unavailable with this
	// reason, whatever the client declared: its sender would approve its
	// own call.
	ApprovalElsewhere string
	// Evidence, when set, is handed every decision and every forwarded
	// call's end, for signed receipts (evidence.go).
	Evidence Evidence
	// Tracer, when set, traces every gated request (trace.go).
	Tracer trace.Tracer
}

// UpstreamExitError reports that the upstream server exited while the
// client was still connected.
type UpstreamExitError struct{ Err error }

func (e *UpstreamExitError) Error() string {
	if e.Err == nil {
		return "the upstream MCP server exited"
	}
	return "the upstream MCP server exited: " + e.Err.Error()
}

func (e *UpstreamExitError) Unwrap() error { return e.Err }

// JSON-RPC error codes the relay itself answers with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeInternalError  = -32603
)

// session is one running proxy.
type session struct {
	// clientClosed is set at the client's EOF: an error the upstream then
	// answers to a call in flight may be the end of its input cancelling
	// the call, so it is charged like a cancellation, not released.
	clientClosed atomic.Bool

	cfg      Config
	log      *zap.Logger
	toClient *frameWriter
	toServer *frameWriter

	mu        sync.Mutex
	pending   pendingTable
	listToken string
	// bound is the delegation the client set with delegateos/delegate:
	// its token stands in for SessionToken until the delegation ends.
	bound *gate.Binding
	// background is delegation work (verifying an attestation) still
	// running; Run cancels ctx and waits for it. closing (under mu) stops
	// new work from starting once Run is returning.
	background sync.WaitGroup
	ctx        context.Context
	closing    bool

	// pins, when the policy names tool_pins, hides and refuses what the
	// upstream does not list as approved (pins.go).
	pins *pinner

	// appr holds the calls waiting for a person's approval (approval.go).
	appr approvals

	// sent is the frame being handled as the client sent it, when the
	// relay escaped line separators in it (lineSafe); nil otherwise.
	sent     []byte
	lastTool string   // see toolName
	upSeq    int64    // the id of the last request forwarded (the client's goroutine's)
	upText   [20]byte // where the client's goroutine writes a number it forwards with

	// Each pump's log lines. The client's decisions are written as they
	// are made; settlements are written once the responses they settle
	// have been flushed to the client.
	clientLog, serverLog logBatch
	// serverExec holds the execution records of the calls the server's
	// pump settled, handed to Evidence with its log lines, once per batch
	// (endServerBatch): the writer is woken once for a batch of responses,
	// and after they have gone to the client. Each call's decision was
	// handed over before the call was forwarded, so before its execution.
	serverExec []*receipt.Execution
}

// Run relays between the client (clientIn, clientOut) and a freshly
// started upstream until the client closes its input (then the upstream is
// shut down and Run returns nil) or the upstream exits (then pending
// requests are answered with errors and Run returns *UpstreamExitError).
func Run(ctx context.Context, cfg Config, clientIn io.Reader, clientOut io.Writer) error {
	if len(cfg.Upstream) == 0 && cfg.UpstreamConn == nil {
		return errors.New("no upstream command")
	}
	if cfg.Gates == nil {
		if cfg.Gate == nil {
			return errors.New("no gate")
		}
		cfg.Gates = gate.NewCurrent(&gate.Snapshot{Policy: cfg.Gate.Policy, Gate: cfg.Gate, Delegations: cfg.Delegations})
	}
	cfg.Gate, cfg.Delegations = nil, nil // read through Gates
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 5 * time.Second
	}
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	if cfg.Observe {
		log.Warn(ObserveBanner)
	}
	pins, err := newPinner(cfg.Gates.Load().Gate.Policy)
	if err != nil {
		return err
	}
	up, err := startUpstream(ctx, cfg, log)
	if err != nil {
		return err
	}
	s := &session{
		cfg: cfg, log: log,
		toClient: newFrameWriter(clientOut),
		toServer: newFrameWriter(up.in),
		pending:  newPendingTable(),
		pins:     pins,
	}
	// An attestation still being verified is answered before Run
	// returns: after the client's EOF it is allowed to finish (a client may
	// send delegateos/complete and close), after a signal or the
	// upstream's exit it is cancelled.
	var cancel context.CancelFunc
	s.ctx, cancel = context.WithCancel(ctx)
	interrupted := false
	defer func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		if interrupted {
			cancel()
		}
		s.background.Wait()
		cancel()
	}()

	stderrDone := make(chan struct{})
	if up.stderr != nil {
		go func() { defer close(stderrDone); s.relayStderr(up.stderr) }()
	} else {
		close(stderrDone)
	}
	serverDone := make(chan struct{})
	go func() { defer close(serverDone); s.fromServer(up.out) }()
	clientDone := make(chan error, 1)
	go func() { clientDone <- s.fromClient(clientIn) }()

	waitDone := make(chan error, 1)
	go func() {
		<-serverDone
		<-stderrDone
		waitDone <- up.wait()
	}()

	for {
		select {
		case sig := <-cfg.Signals:
			log.Info("passing signal to the upstream", zap.String("signal", sig.String()))
			up.signal(sig)
			interrupted = true
		case err := <-clientDone:
			// Client EOF: close the upstream's input, give it time to exit,
			// then terminate it; either way it is reaped.
			if err != nil {
				log.Warn("reading from the client failed", zap.Error(err))
			}
			s.clientClosed.Store(true)
			up.in.Close()
			return s.shutdown(up, waitDone)
		case werr := <-waitDone:
			interrupted = true
			// What the exit status was, the client is told; what the
			// upstream said on its way out may hold what the gate keeps
			// from clients, so it stays in the log.
			status := "exited"
			if werr != nil {
				status = werr.Error()
			}
			s.failPending("the upstream MCP server exited before answering (" + status + "); its standard error is in delegateos's log")
			log.Error("upstream exited", zap.Error(werr))
			return &UpstreamExitError{Err: werr}
		}
	}
}

func (s *session) shutdown(up *upstream, waitDone <-chan error) error {
	defer s.failPending("")
	select {
	case err := <-waitDone:
		s.log.Info("upstream exited after the client closed", zap.Error(err))
		return nil
	case <-time.After(s.cfg.ShutdownGrace):
	}
	s.log.Warn("upstream did not exit after its input closed; terminating it")
	up.terminate()
	select {
	case <-waitDone:
		return nil
	case <-time.After(2 * time.Second):
	}
	up.kill()
	<-waitDone
	return nil
}

// maxStderrLine bounds one logged line of the upstream's stderr.
const maxStderrLine = 64 << 10

// relayStderr copies the upstream's stderr into the log, line by line:
// stdout is the protocol and nothing else may reach it. A longer line is
// logged truncated and the rest of it skipped: reading must never stop
// before EOF, or the upstream blocks on a full pipe.
func (s *session) relayStderr(r io.Reader) {
	br := bufio.NewReaderSize(r, maxStderrLine)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			fields := []zap.Field{zap.String("line", strings.TrimRight(string(line), "\r\n"))}
			if errors.Is(err, bufio.ErrBufferFull) {
				fields = append(fields, zap.Bool("truncated", true))
			}
			s.log.Info("upstream stderr", fields...)
		}
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = br.ReadSlice('\n')
		}
		if err != nil {
			return
		}
	}
}

// fromClient handles every frame the client sends.
func (s *session) fromClient(r io.Reader) error {
	defer s.toServer.flush()
	fr := newFrameReader(r, s.cfg.MaxFrameBytes)
	for {
		if fr.idle() {
			// Nothing more is waiting: send what was queued before blocking.
			s.toServer.flush()
		}
		frame, _, err := fr.next()
		var tooLarge errFrameTooLarge
		switch {
		case errors.As(err, &tooLarge):
			h, _ := scanHeader(tooLarge.prefix)
			s.log.Warn("client frame over the size limit", zap.Int("limit", s.cfg.MaxFrameBytes), zap.String("method", h.method))
			msg := fmt.Sprintf("message exceeds the proxy's frame limit of %d bytes", s.cfg.MaxFrameBytes)
			switch {
			case h.method != "" && h.id == nil:
				// A notification gets no answer.
			case h.kind == kindResponse && s.approvalTooLarge(h.id, msg):
			case h.kind == kindResponse:
				// The client's answer to a request from the upstream, which
				// is waiting for it: the upstream gets the error instead.
				s.replyError(s.toServer, h.id, codeInternalError, "the client's response "+msg, nil)
			default:
				s.replyError(s.toClient, h.id, codeInvalidRequest, msg, nil)
			}
			continue
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		s.clientFrame(frame)
	}
}

// clientFrame handles one frame from the client: it is refused, answered,
// or forwarded to the upstream (a tools/call only if the gate allows it).
func (s *session) clientFrame(frame []byte) {
	safe, reason := lineSafe(frame)
	if reason != "" {
		// Some upstream readers split lines where this proxy does not: the
		// frame they would read is not the frame the gate would check. The
		// request this one reads as is answered, so that its sender is not
		// left waiting.
		s.log.Warn("client frame refused", zap.String("reason", reason))
		s.replyError(s.toClient, unsafeFrameID(frame), codeParseError, "parse error: "+reason, nil)
		return
	}
	if len(safe) != len(frame) {
		// Line separators were escaped: the client's own bytes are what
		// its receipt's payload_hash names.
		s.sent = frame
		defer func() { s.sent = nil }()
	}
	frame = safe
	h, err := scanClientHeader(frame)
	if err != nil {
		code, msg := unreadable(frame)
		var id []byte
		if code == codeInvalidRequest {
			if errors.Is(err, errAmbiguous) {
				msg = "invalid request: " + err.Error()
			}
			// JSON of the wrong shape: answer the request it claims to
			// be, if its id was read, so that its sender is not left
			// waiting.
			if len(h.id) > 0 && string(h.id) != "null" {
				id = h.id
			}
		}
		s.log.Warn("client frame refused", zap.String("reason", msg))
		s.replyError(s.toClient, id, code, msg, nil)
		return
	}
	if isDelegationMethod(h.method) && h.kind != kindResponse {
		var id []byte
		if h.kind == kindRequest {
			if _, ok := parseRequestID(h.id); !ok {
				s.replyError(s.toClient, nil, codeInvalidRequest, "invalid request id: use a string of at most 256 bytes or an integer within ±2^53", nil)
				return
			}
			id = h.id
		}
		s.delegationMessage(h.method, id, h.params)
		return
	}
	switch h.kind {
	case kindRequest:
		s.clientRequest(h, frame)
	case kindNotification:
		s.clientNotification(h, frame)
	default:
		if s.approvalAnswer(h, frame) {
			return
		}
		// The client's answer to a request from the upstream.
		s.toServer.queue(frame)
	}
}

// fromServer handles every frame the upstream sends.
func (s *session) fromServer(r io.Reader) {
	defer func() {
		s.toClient.flush()
		s.endServerBatch()
	}()
	fr := newFrameReader(r, s.cfg.MaxFrameBytes)
	for {
		if fr.idle() {
			// Nothing more is waiting: the client gets its responses
			// first, and then the calls they settled are logged and
			// their execution records handed over.
			s.toClient.flush()
			s.endServerBatch()
		} else if s.serverLog.len() >= maxBatchedLines {
			s.endServerBatch()
		}
		frame, raw, err := fr.next()
		var tooLarge errFrameTooLarge
		switch {
		case errors.As(err, &tooLarge):
			s.serverTooLarge(tooLarge.prefix)
			continue
		case err != nil:
			if !errors.Is(err, io.EOF) {
				s.log.Warn("reading from the upstream failed", zap.Error(err))
			}
			return
		}
		s.serverFrame(frame, raw)
	}
}

// serverFrame handles one frame from the upstream: a response settles the
// call it answers (and a tools/list result is filtered); every frame is
// relayed as it was read unless it had to be rewritten.
func (s *session) serverFrame(frame, raw []byte) {
	// Every top-level member is read, as strictly as a client's: the id
	// picks the request an answer settles and the members say whether it
	// is an error, so the relay must read them as the client will.
	h, err := scanUpstream(frame)
	if errors.Is(err, errAmbiguous) {
		if lh, lerr := scanHeader(frame); lerr == nil {
			if lh.kind == kindResponse {
				s.unreadableAnswer(lh, err)
				return
			}
			s.log.Warn("upstream message refused", zap.String("method", lh.method), zap.String("reason", err.Error()))
			if lh.kind == kindRequest {
				s.replyError(s.toServer, lh.id, codeInvalidRequest, "invalid request: "+err.Error(), nil)
			}
			return
		}
	}
	if err != nil {
		s.log.Warn("upstream sent a frame that is not JSON-RPC", zap.Int("bytes", len(frame)))
		code, msg := unreadable(frame)
		s.replyError(s.toServer, nil, code, msg, nil)
		return
	}
	if h.kind == kindRequest && s.forgedApprovalID(h.id) {
		s.log.Warn("upstream request refused", zap.String("method", h.method), zap.String("reason", "its id is under the proxy's approval prefix"))
		s.replyError(s.toServer, h.id, codeInvalidRequest, "invalid request: ids starting "+approvalIDPrefix+" are the proxy's own", nil)
		return
	}
	if h.kind != kindResponse {
		if err := h.paramsRepeats(); err != nil {
			// As an answer that could be read two ways: which of the two
			// a client shows (an elicitation's message, a sampling
			// request's maxTokens) depends on its parser.
			upstreamRefused.Add(1)
			s.log.Warn("upstream message refused", zap.String("method", h.method), zap.String("reason", err.Error()))
			if h.kind == kindRequest {
				s.replyError(s.toServer, h.id, codeInvalidRequest, "invalid request: "+err.Error(), nil)
			}
			return
		}
		s.pinNotified(h.method)
		if bytes.Contains(frame, subscriptionIDKey) {
			if at, v := subscriptionID(frame, "params"); at >= 0 {
				s.mu.Lock()
				p := s.pending.answered(v)
				var id []byte
				if p != nil && p.method == gate.MethodSubscriptionsListen {
					id = clone(p.id)
				}
				s.mu.Unlock()
				if id != nil {
					s.toClient.queueEdited(frame, []edit{{from: at, to: at + len(v), with: id}})
					return
				}
			}
		}
		s.toClient.queue(raw)
		return
	}
	if err := h.answerRepeats(); err != nil {
		s.unreadableAnswer(h, err)
		return
	}
	p := s.take(h.id)
	if p == nil {
		if s.pinAnswer(h.id, frame) {
			return
		}
		// No request in flight has this id: it answers one the client
		// cancelled, or none at all. Relaying it could answer a later
		// request of the client's with the same id.
		s.log.Debug("upstream answer to no pending request dropped", zap.ByteString("id", h.id))
		return
	}
	// Taken out of the table, p is this goroutine's alone.
	defer p.free()
	edits := []edit{{from: h.idAt, to: h.idAt + len(h.id), with: p.id}}
	if p.method == gate.MethodSubscriptionsListen {
		// The stream's id is the listen request's: the client's.
		if at, v := subscriptionID(frame, "result"); at >= 0 && string(v) == strconv.FormatInt(p.up, 10) {
			edits = append(edits, edit{from: at, to: at + len(v), with: p.id})
		}
	}
	switch {
	case roleOf(p.method) == roleList && !h.isError:
		filtered, ok := s.filterList(p, frame)
		if !ok {
			s.replyError(s.toClient, p.id, codeInternalError, "the upstream's "+p.method+" result cannot be read, so it cannot be filtered", nil)
			return
		}
		if filtered != nil {
			s.toClient.queue(filtered)
			return
		}
	case p.decision != nil:
		cost := p.decision.Call.Cost
		release := h.isError
		if !h.isError {
			// MCP 2026-07-28: a result asking for client input is not the
			// call's outcome; the client retries the call with the input,
			// and that retry is gated and charged.
			if inputRequired(frame) {
				release = true
			} else if s.gateOf(p).HonourUpstreamCost {
				if c, ok := reportedCost(frame); ok {
					cost = c
				}
			}
		}
		outcome := outcomeResult
		switch {
		case h.isError && s.clientClosed.Load():
			cost, release, outcome = p.cost(), false, outcomeErrorAfterClose
		case h.isError:
			outcome = outcomeError
		case release:
			outcome = outcomeInputRequired
		}
		s.noteResponse(p, frame, edits)
		s.settle(p, cost, release, outcome, &s.serverLog)
	}
	s.toClient.queueEdited(frame, edits)
}

// upstreamRefused counts the upstream notifications and requests refused
// for giving a member of their params twice.
var upstreamRefused atomic.Int64

// UpstreamMessagesRefused is the number of notifications and requests
// from upstreams that sessions of this process refused, not relayed to
// their clients, because their params give a member twice (or nest too
// deep to tell).
func UpstreamMessagesRefused() int64 { return upstreamRefused.Load() }

// paramsRepeats is paramsRepeatsIn(h.params), without reading params
// again when scanUpstream found them clean.
func (h *header) paramsRepeats() error {
	if h.paramsClean {
		return nil
	}
	return paramsRepeatsIn(h.params)
}

// answerRepeats is answerRepeatsIn(h.answer, h.isError), without reading
// the answer again when scanUpstream found it clean.
func (h *header) answerRepeats() error {
	if h.answerClean {
		return nil
	}
	return answerRepeatsIn(h.answer, h.isError)
}

// paramsRepeatsIn reports upstream params (of a notification or a request
// for the client) that give a member twice in one of their objects, or
// nest deeper than the check reads; nil params pass.
func paramsRepeatsIn(v []byte) error {
	if v == nil {
		return nil
	}
	name, found, tooDeep := repeatedMember(v)
	switch {
	case found:
		if len(name) > 64 {
			name = name[:64] + "…"
		}
		return fmt.Errorf("its params give the member %s twice", strconv.Quote(name))
	case tooDeep:
		return fmt.Errorf("its params nest deeper than %d levels, too deep to check that no member is given twice", maxNesting)
	}
	return nil
}

// answerRepeatsIn reports an upstream response whose result (or error), v,
// gives a member twice in one of its objects: the relay refuses it from
// the upstream as the gate refuses it from the client, since which of the
// two the client reads depends on its parser, and a receipt could not say
// which one it got.
func answerRepeatsIn(v []byte, isError bool) error {
	which := "result"
	if isError {
		which = "error"
	}
	name, found, tooDeep := repeatedMember(v)
	switch {
	case found:
		if len(name) > 64 {
			name = name[:64] + "…"
		}
		return fmt.Errorf("its %s gives the member %s twice", which, strconv.Quote(name))
	case tooDeep:
		return fmt.Errorf("its %s nests deeper than %d levels, too deep to check that no member is given twice", which, maxNesting)
	}
	return nil
}

// unreadableAnswer handles an upstream response that the client could
// read differently from the relay (a second id, "error":null before a
// result, a re-cased member): it is not relayed. The request its first id
// names gets an error instead, and a gated call is charged, since the
// upstream may have done the work.
func (s *session) unreadableAnswer(h header, err error) {
	p := s.take(h.id)
	s.log.Warn("upstream answer refused", zap.String("reason", err.Error()))
	if p == nil {
		s.pinAnswer(h.id, nil)
		return
	}
	s.settle(p, p.cost(), false, outcomeUnreadable, &s.serverLog)
	s.replyError(s.toClient, p.id, codeInternalError, "the upstream's answer could be read two ways ("+err.Error()+"), so it is not relayed", nil)
	p.free()
}

// serverTooLarge answers an upstream frame over the limit: a response is
// turned into an error for the client that asked, a request is refused back
// to the upstream.
func (s *session) serverTooLarge(prefix []byte) {
	h, _ := scanHeader(prefix)
	msg := fmt.Sprintf("message exceeds the proxy's frame limit of %d bytes", s.cfg.MaxFrameBytes)
	s.log.Warn("upstream frame over the size limit", zap.Int("limit", s.cfg.MaxFrameBytes), zap.String("method", h.method))
	switch {
	case h.method != "" && h.id != nil:
		s.replyError(s.toServer, h.id, codeInvalidRequest, msg, nil)
	case h.method == "" && h.id != nil:
		if p := s.take(h.id); p != nil {
			s.settle(p, p.cost(), false, outcomeTooLarge, &s.serverLog)
			s.replyError(s.toClient, p.id, codeInternalError, "the upstream's response "+msg, nil)
			p.free()
		} else {
			s.pinAnswer(h.id, nil)
		}
	}
}

// take removes and returns the request an upstream response answers.
func (s *session) take(id []byte) *pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending.answered(id)
	if p != nil {
		// Out of the table, the request is the caller's alone: a
		// cancellation can no longer find it to settle it too.
		s.pending.remove(p)
	}
	return p
}

// How an allowed call ended, as its line's outcome says.
const (
	outcomeResult          = "result"                        // the upstream answered with a result: charged
	outcomeError           = "error"                         // a JSON-RPC error: released
	outcomeErrorAfterClose = "error after the client closed" // the same after the client's EOF, which may have caused it: charged
	outcomeInputRequired   = "input required"                // MCP 2026-07-28 input request: released, the retry is charged
	outcomeTooLarge        = "too large"                     // the answer exceeded the frame limit: charged
	outcomeUnreadable      = "unreadable"                    // the answer could be read two ways and was not relayed: charged
	outcomeCancelled       = "cancelled"                     // the client cancelled it: charged
	outcomeUnanswered      = "unanswered"                    // the session ended first: charged
	outcomeNotForwarded    = "not forwarded"                 // it never reached the upstream: released
)

// settle records an allowed call's spend once its outcome is known, and
// adds the call's one line to lb: the decision, what the call was charged
// (cost; 0 when the reservation is released), the time from the decision
// to the outcome (upstream_latency) and the outcome.
func (s *session) settle(p *pending, cost int64, release bool, outcome string, lb *logBatch) {
	if p.decision == nil {
		return
	}
	var err error
	if cost, err = s.gateOf(p).Settle(p.decision, cost, release); err != nil {
		s.log.Error("recording spend failed", zap.String("method", p.method), zap.String("target", p.target), zap.Error(err))
	}
	if release {
		cost = 0
	}
	if p.ev.decision != nil {
		s.executed(p, cost, outcome, lb == &s.serverLog)
	}
	spanSettled(p, cost, outcome)
	lb.settled(p.method, p.target, p.decision, cost, time.Since(p.start), outcome, release)
}

// endServerBatch ends a batch of the server's pump: the execution records
// of the calls it settled are handed over, in order, and their lines
// written.
func (s *session) endServerBatch() {
	if len(s.serverExec) > 0 {
		for i, e := range s.serverExec {
			s.cfg.Evidence.Executed(e)
			s.serverExec[i] = nil
		}
		s.serverExec = s.serverExec[:0]
	}
	s.serverLog.writeTo(s.log)
}

// settleNow is settle with the line written at once, by the client's pump.
func (s *session) settleNow(p *pending, cost int64, release bool, outcome string) {
	s.settle(p, cost, release, outcome, &s.clientLog)
	s.clientLog.writeTo(s.log)
}

// failPending answers every request still waiting (when msg is set) and
// settles their spend as charged: an upstream that vanished may have done
// the work.
func (s *session) failPending(msg string) {
	s.dropHeld(msg)
	s.mu.Lock()
	ps := s.pending.drain()
	s.mu.Unlock()
	var lines logBatch // the pumps' batches may still be in use
	for _, p := range ps {
		s.settle(p, p.cost(), false, outcomeUnanswered, &lines)
		lines.writeTo(s.log)
		if msg != "" {
			s.replyError(s.toClient, p.id, codeInternalError, msg, nil)
		}
	}
}

// reportedCost reads result._meta[CostMetaKey].
func reportedCost(frame []byte) (int64, bool) {
	var msg struct {
		Result struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"result"`
	}
	if json.Unmarshal(frame, &msg) != nil {
		return 0, false
	}
	var c int64
	if raw, ok := msg.Result.Meta[policy.UpstreamCostKey]; !ok || json.Unmarshal(raw, &c) != nil || c < 0 {
		return 0, false
	}
	return c, true
}

// unreadable is the JSON-RPC error for a frame that is not a message:
// a parse error if it is not JSON, an invalid request if it is JSON of
// the wrong shape (JSON-RPC 2.0 §5.1).
func unreadable(frame []byte) (code int, message string) {
	if json.Valid(frame) {
		return codeInvalidRequest, "invalid request: not a JSON-RPC message"
	}
	return codeParseError, "parse error: not a JSON-RPC message"
}

// rpcError is a JSON-RPC error response.
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   rpcErrorBody    `json:"error"`
}

type rpcErrorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (s *session) replyError(w *frameWriter, id []byte, code int, message string, data any) {
	if id == nil {
		id = []byte("null")
	}
	b, err := marshalFrame(rpcError{JSONRPC: "2.0", ID: id, Error: rpcErrorBody{Code: code, Message: message, Data: data}})
	if err != nil {
		s.log.Error("encoding an error response failed", zap.Error(err))
		return
	}
	w.write(append(b, '\n'))
}

// maxPending bounds the requests in flight from the client.
const maxPending = 4096
