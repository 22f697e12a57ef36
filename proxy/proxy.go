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
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/policy"
)

// Config configures a proxy session.
type Config struct {
	// Upstream is the MCP server's command and arguments.
	Upstream []string
	// Gate decides tools/call; required.
	Gate *Gate
	// SessionToken is the DCT used when a call carries none, and whose view
	// tools/list shows. Empty: calls must carry their own, and tools/list
	// shows the view of the last token a call was allowed with.
	SessionToken string
	// MaxFrameBytes limits one message; zero means DefaultMaxFrameBytes.
	MaxFrameBytes int
	// HonourUpstreamCost charges the cost an upstream reports in a result's
	// _meta (policy.UpstreamCostKey) instead of the policy's.
	HonourUpstreamCost bool
	// Log receives one line per decision and lifecycle event; nil discards.
	Log *zap.Logger
	// Signals are passed on to the upstream.
	Signals <-chan os.Signal
	// ShutdownGrace is how long the upstream gets to exit after its stdin
	// is closed before it is terminated; zero means 5s.
	ShutdownGrace time.Duration
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
	cfg      Config
	log      *zap.Logger
	toClient *frameWriter
	toServer *frameWriter

	mu        sync.Mutex
	pending   map[string]*pending
	listToken string
}

// pending is a client request forwarded to the upstream and not yet answered.
type pending struct {
	id       []byte
	method   string
	tool     string
	decision *Decision
	start    time.Time
}

// Run relays between the client (clientIn, clientOut) and a freshly
// started upstream until the client closes its input (then the upstream is
// shut down and Run returns nil) or the upstream exits (then pending
// requests are answered with errors and Run returns *UpstreamExitError).
func Run(ctx context.Context, cfg Config, clientIn io.Reader, clientOut io.Writer) error {
	if len(cfg.Upstream) == 0 {
		return errors.New("no upstream command")
	}
	if cfg.Gate == nil {
		return errors.New("no gate")
	}
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
	cmd := exec.CommandContext(ctx, cfg.Upstream[0], cfg.Upstream[1:]...)
	setProcAttr(cmd)
	upIn, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	upOut, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	upErr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot start the upstream MCP server %q: %w", cfg.Upstream[0], err)
	}
	log.Info("upstream started", zap.Strings("command", cfg.Upstream), zap.Int("pid", cmd.Process.Pid))
	s := &session{
		cfg: cfg, log: log,
		toClient: newFrameWriter(clientOut),
		toServer: newFrameWriter(upIn),
		pending:  map[string]*pending{},
	}

	stderrDone := make(chan struct{})
	go func() { defer close(stderrDone); s.relayStderr(upErr) }()
	serverDone := make(chan struct{})
	go func() { defer close(serverDone); s.fromServer(upOut) }()
	clientDone := make(chan error, 1)
	go func() { clientDone <- s.fromClient(clientIn) }()

	waitDone := make(chan error, 1)
	go func() {
		<-serverDone
		<-stderrDone
		waitDone <- cmd.Wait()
	}()

	for {
		select {
		case sig := <-cfg.Signals:
			log.Info("passing signal to the upstream", zap.String("signal", sig.String()))
			_ = cmd.Process.Signal(sig)
		case err := <-clientDone:
			// Client EOF: close the upstream's input, give it time to exit,
			// then terminate it; either way it is reaped.
			if err != nil {
				log.Warn("reading from the client failed", zap.Error(err))
			}
			upIn.Close()
			return s.shutdown(cmd, waitDone)
		case werr := <-waitDone:
			s.failPending("the upstream MCP server exited before answering")
			log.Error("upstream exited", zap.Error(werr))
			return &UpstreamExitError{Err: werr}
		}
	}
}

func (s *session) shutdown(cmd *exec.Cmd, waitDone <-chan error) error {
	defer s.failPending("")
	select {
	case err := <-waitDone:
		s.log.Info("upstream exited after the client closed", zap.Error(err))
		return nil
	case <-time.After(s.cfg.ShutdownGrace):
	}
	s.log.Warn("upstream did not exit after its input closed; terminating it")
	_ = terminate(cmd.Process)
	select {
	case <-waitDone:
		return nil
	case <-time.After(2 * time.Second):
	}
	_ = cmd.Process.Kill()
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
		if reason := lineUnsafe(frame); reason != "" {
			// Some upstream readers split lines where this proxy does not: the
			// frame they would read is not the frame the gate would check.
			s.log.Warn("client frame refused", zap.String("reason", reason))
			s.replyError(s.toClient, nil, codeParseError, "parse error: "+reason, nil)
			continue
		}
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
				if _, ok := idKey(h.id); ok {
					id = h.id
				}
			}
			s.log.Warn("client frame refused", zap.String("reason", msg))
			s.replyError(s.toClient, id, code, msg, nil)
			continue
		}
		if h.kind != kindRequest {
			switch h.method {
			case "notifications/cancelled":
				s.cancelled(frame)
			case "tools/call":
				// A call without an id cannot be answered, so it cannot be
				// refused either: it is not forwarded.
				s.log.Warn("client frame refused", zap.String("reason", "tools/call sent as a notification"))
				continue
			}
			s.toServer.queue(frame)
			continue
		}
		key, ok := requestIDKey(h.id)
		if !ok {
			s.replyError(s.toClient, nil, codeInvalidRequest, "invalid request id: use a string of at most 256 bytes or an integer within ±2^53", nil)
			continue
		}
		p := &pending{id: clone(h.id), method: h.method, start: time.Now()}
		s.mu.Lock()
		_, dup := s.pending[key]
		full := len(s.pending) >= maxPending
		s.mu.Unlock()
		if dup {
			s.replyError(s.toClient, h.id, codeInvalidRequest, "a request with this id is already in flight (or was cancelled and not yet answered)", nil)
			continue
		}
		if full {
			s.replyError(s.toClient, h.id, codeInvalidRequest, fmt.Sprintf("more than %d requests in flight", maxPending), nil)
			continue
		}
		out := frame
		if h.method == "tools/call" {
			var deny bool
			out, deny = s.gateCall(p, h.params, frame)
			if deny {
				continue
			}
		}
		s.mu.Lock()
		s.pending[key] = p
		s.mu.Unlock()
		if err := s.toServer.queue(out); err != nil {
			s.mu.Lock()
			delete(s.pending, key)
			s.mu.Unlock()
			s.settle(p, 0, true)
			s.replyError(s.toClient, h.id, codeInternalError, "the upstream MCP server is not accepting input", nil)
		}
	}
}

// delegateosParams is params._delegateos (§11.1).
type delegateosParams struct {
	DCT          string `json:"dct"`
	Format       string `json:"format"`
	DelegationID string `json:"delegationId"`
	ContractID   string `json:"contractId"`
}

// gateCall decides a tools/call. It returns the frame to forward (without
// _delegateos) or deny=true after answering the client itself.
func (s *session) gateCall(p *pending, params, frame []byte) (out []byte, deny bool) {
	// The params are read in place; only a call that carries _delegateos
	// is decoded and re-encoded.
	var nameRaw, args, dos []byte
	strip := false
	isObject := params != nil && eachMember(params, func(k string, v []byte) {
		switch {
		case k == "name":
			nameRaw = v
		case k == "arguments":
			args = v
		case k == "_delegateos":
			dos, strip = v, true
		case strings.EqualFold(k, "_delegateos"):
			strip = true
		}
	})
	if !isObject {
		s.replyError(s.toClient, p.id, codeInvalidRequest, "tools/call params must be an object", nil)
		return nil, true
	}
	// The upstream must read the call the gate decides: no member of the
	// params may be given twice or in two letter cases, at any depth.
	if name, ok := repeatedMember(params); !ok || name != "" {
		detail := fmt.Sprintf("tools/call params give the member %q more than once (names that differ only in letter case count as the same)", name)
		if !ok {
			detail = fmt.Sprintf("tools/call params nest deeper than %d levels", maxNesting)
		}
		s.replyError(s.toClient, p.id, codeInvalidRequest, detail, nil)
		return nil, true
	}
	tool, ok := "", len(nameRaw) > 0 && nameRaw[0] == '"'
	if ok {
		tool, ok = unquote(nameRaw)
	}
	if !ok || tool == "" {
		s.replyError(s.toClient, p.id, codeInvalidRequest, "tools/call params.name must be a string", nil)
		return nil, true
	}
	p.tool = tool
	req := CallRequest{Tool: tool, Arguments: args}
	if dos != nil {
		var d delegateosParams
		if err := json.Unmarshal(dos, &d); err != nil {
			refused := s.cfg.Gate.Refuse(req, dct.Malformed, "params._delegateos is not an object with a dct string")
			s.deny(p, &refused)
			return nil, true
		}
		if d.Format != "" && d.Format != dct.Format {
			refused := s.cfg.Gate.Refuse(req, dct.Malformed, fmt.Sprintf("unknown token format %q", d.Format))
			s.deny(p, &refused)
			return nil, true
		}
		req.Token, req.ContractID, req.DelegationID = d.DCT, d.ContractID, d.DelegationID
	}
	if req.Token == "" {
		req.Token = s.cfg.SessionToken
	}
	d := s.cfg.Gate.Decide(req)
	if !d.Allowed {
		s.deny(p, &d)
		return nil, true
	}
	p.decision = &d
	s.logDecision(p, &d)
	if req.Token != s.cfg.SessionToken && s.cfg.SessionToken == "" {
		s.mu.Lock()
		s.listToken = req.Token
		s.mu.Unlock()
	}
	if !strip {
		return frame, false
	}
	var msg, members map[string]json.RawMessage
	err := json.Unmarshal(frame, &msg)
	if err == nil {
		err = json.Unmarshal(params, &members)
	}
	for k := range members {
		if strings.EqualFold(k, "_delegateos") {
			delete(members, k)
		}
	}
	if err == nil {
		if msg["params"], err = json.Marshal(members); err == nil {
			out, err = json.Marshal(msg)
		}
	}
	if err != nil {
		s.settle(p, 0, true)
		s.replyError(s.toClient, p.id, codeInternalError, "cannot re-encode the call", nil)
		return nil, true
	}
	return append(out, '\n'), false
}

func (s *session) deny(p *pending, d *Decision) {
	s.logDecision(p, d)
	s.replyError(s.toClient, p.id, DenialCode, DenialMessage, d.Denial)
}

func (s *session) logDecision(p *pending, d *Decision) {
	// Every decision line has the same members: tool, allowed, reason,
	// delegation ("" when no token verified), cost and latency.
	reason, delegation := "granted", ""
	switch {
	case d.Denial != nil:
		reason = string(d.Denial.Type)
	case d.Unauthenticated:
		reason = "unauthenticated"
	}
	if d.Scope != nil {
		delegation = d.Scope.DelegationID
	}
	fields := []zap.Field{
		zap.String("tool", p.tool), zap.Bool("allowed", d.Allowed), zap.String("reason", reason),
		zap.String("delegation", delegation), zap.Int64("cost", d.Call.Cost), zap.Duration("latency", d.Latency),
	}
	if d.Denial != nil {
		fields = append(fields, zap.String("detail", d.Denial.Detail))
	}
	if d.Unauthenticated {
		fields = append(fields, zap.Bool("unauthenticated", true))
	}
	s.log.Info("decision", fields...)
}

// fromServer handles every frame the upstream sends.
func (s *session) fromServer(r io.Reader) {
	defer s.toClient.flush()
	fr := newFrameReader(r, s.cfg.MaxFrameBytes)
	for {
		if fr.idle() {
			s.toClient.flush()
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
		h, err := scanHeader(frame)
		if err != nil {
			s.log.Warn("upstream sent a frame that is not JSON-RPC", zap.Int("bytes", len(frame)))
			code, msg := unreadable(frame)
			s.replyError(s.toServer, nil, code, msg, nil)
			continue
		}
		if h.kind != kindResponse {
			s.toClient.queue(raw)
			continue
		}
		p := s.take(h.id)
		switch {
		case p == nil:
		case p.method == "tools/list" && !h.isError:
			filtered, ok := s.filterList(frame)
			if !ok {
				s.replyError(s.toClient, p.id, codeInternalError, "the upstream's tools/list result cannot be read, so it cannot be filtered", nil)
				continue
			}
			if filtered != nil {
				raw = filtered
			}
		case p.decision != nil:
			cost := p.decision.Call.Cost
			release := h.isError
			if !h.isError {
				// MCP 2026-07-28: a result asking for client input is not the
				// call's outcome; the client retries the call with the input,
				// and that retry is gated and charged.
				if rt := resultMember(frame, "resultType"); string(rt) == `"input_required"` {
					release = true
				} else if s.cfg.HonourUpstreamCost {
					if c, ok := reportedCost(frame); ok {
						cost = c
					}
				}
			}
			s.settle(p, cost, release)
		}
		s.toClient.queue(raw)
	}
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
			s.settle(p, p.cost(), false)
			s.replyError(s.toClient, p.id, codeInternalError, "the upstream's response "+msg, nil)
		}
	}
}

func (p *pending) cost() int64 {
	if p.decision == nil {
		return 0
	}
	return p.decision.Call.Cost
}

func (s *session) take(id []byte) *pending {
	key, ok := idKey(id)
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending[key]
	if p == nil {
		return nil
	}
	delete(s.pending, key)
	// The caller owns the decision now; a cancellation cannot settle it too.
	c := *p
	p.decision = nil
	return &c
}

// settle records an answered call's spend and logs it.
func (s *session) settle(p *pending, cost int64, release bool) {
	if p.decision == nil {
		return
	}
	if err := s.cfg.Gate.Settle(p.decision, cost, release); err != nil {
		s.log.Error("recording spend failed", zap.String("tool", p.tool), zap.Error(err))
	}
	fields := []zap.Field{zap.String("tool", p.tool), zap.Duration("upstream_latency", time.Since(p.start))}
	if release {
		fields = append(fields, zap.Int64("cost", 0), zap.Bool("released", true))
	} else {
		fields = append(fields, zap.Int64("cost", cost))
	}
	if p.decision.Scope != nil {
		fields = append(fields, zap.String("delegation", p.decision.Scope.DelegationID))
	}
	s.log.Info("call settled", fields...)
}

// failPending answers every request still waiting (when msg is set) and
// settles their spend as charged: an upstream that vanished may have done
// the work.
func (s *session) failPending(msg string) {
	s.mu.Lock()
	ps := make([]*pending, 0, len(s.pending))
	for k, p := range s.pending {
		ps = append(ps, p)
		delete(s.pending, k)
	}
	s.mu.Unlock()
	for _, p := range ps {
		s.settle(p, p.cost(), false)
		if msg != "" {
			s.replyError(s.toClient, p.id, codeInternalError, msg, nil)
		}
	}
}

// filterList removes the tools the session's token may not see from a
// tools/list result, keeping every other member, and every kept tool,
// byte for byte. It returns nil when nothing is removed, and false when
// the result cannot be read (the caller then refuses to relay it).
func (s *session) filterList(frame []byte) ([]byte, bool) {
	s.mu.Lock()
	token := s.cfg.SessionToken
	if token == "" {
		token = s.listToken
	}
	s.mu.Unlock()
	view, err := s.cfg.Gate.ListView(token)
	if err != nil {
		s.log.Warn("the session token does not verify; tools/list is empty", zap.Error(err))
	}
	var msg, result map[string]json.RawMessage
	var tools []json.RawMessage
	if json.Unmarshal(frame, &msg) != nil || json.Unmarshal(msg["result"], &result) != nil || json.Unmarshal(result["tools"], &tools) != nil {
		return nil, false
	}
	kept := make([]json.RawMessage, 0, len(tools))
	for _, t := range tools {
		var named struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(t, &named) == nil && view(named.Name) {
			kept = append(kept, t)
		}
	}
	if len(kept) == len(tools) {
		return nil, true
	}
	var err2 error
	if result["tools"], err2 = json.Marshal(kept); err2 != nil {
		return nil, false
	}
	if msg["result"], err2 = json.Marshal(result); err2 != nil {
		return nil, false
	}
	out, err2 := json.Marshal(msg)
	if err2 != nil {
		return nil, false
	}
	s.log.Info("tools/list filtered", zap.Int("upstream", len(tools)), zap.Int("shown", len(kept)))
	return append(out, '\n'), true
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
	b, err := json.Marshal(rpcError{JSONRPC: "2.0", ID: id, Error: rpcErrorBody{Code: code, Message: message, Data: data}})
	if err != nil {
		s.log.Error("encoding an error response failed", zap.Error(err))
		return
	}
	w.write(append(b, '\n'))
}

// frameWriter serializes whole frames onto one stream. Frames the relay
// forwards are queued and flushed when their source has nothing more
// buffered, so a burst of pipelined messages goes out in a few writes and a
// lone message goes out at once; the proxy's own replies are written
// immediately.
type frameWriter struct {
	mu sync.Mutex
	b  *bufio.Writer
}

func newFrameWriter(w io.Writer) *frameWriter {
	return &frameWriter{b: bufio.NewWriterSize(w, 64<<10)}
}

// queue adds one frame; raw carries its line ending unless it was the
// last, unterminated line of its stream.
func (fw *frameWriter) queue(raw []byte) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.add(raw)
}

func (fw *frameWriter) add(raw []byte) error {
	if _, err := fw.b.Write(raw); err != nil {
		return err
	}
	if len(raw) == 0 || raw[len(raw)-1] != '\n' {
		return fw.b.WriteByte('\n')
	}
	return nil
}

// write adds one frame and flushes.
func (fw *frameWriter) write(raw []byte) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if err := fw.add(raw); err != nil {
		return err
	}
	return fw.b.Flush()
}

func (fw *frameWriter) flush() error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.b.Flush()
}

// cancelled settles a call the client gave up on. The server need not
// answer it any more, so its reserved cost is charged now (it may have done
// the work) rather than held until the session ends.
func (s *session) cancelled(frame []byte) {
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(frame, &n) != nil {
		return
	}
	key, ok := idKey(n.Params.RequestID)
	if !ok {
		return
	}
	// The request stays pending: its id may not be reused until the
	// upstream answers (a late answer could otherwise be taken for a new
	// request's), and a tools/list answer is still filtered.
	s.mu.Lock()
	p := s.pending[key]
	var claimed *pending
	if p != nil && p.decision != nil {
		c := *p
		claimed = &c
		p.decision = nil
	}
	s.mu.Unlock()
	if claimed != nil {
		s.log.Info("client cancelled a call", zap.String("tool", claimed.tool))
		s.settle(claimed, claimed.cost(), false)
	}
}

// maxPending bounds the requests in flight from the client.
const maxPending = 4096

// requestIDKey accepts the ids every JSON-RPC implementation reads the same
// way: strings of at most 256 bytes and integers within ±(2^53−1) written
// canonically. "1.0" or "1e0" would be answered as 1 by most servers and
// matched to the wrong request.
func requestIDKey(raw []byte) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	if raw[0] == '"' {
		if len(raw) > 258 {
			return "", false
		}
		return idKey(raw)
	}
	if !canonicalInt.Match(raw) {
		return "", false
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err != nil || n > maxSafeInt || n < -maxSafeInt {
		return "", false
	}
	return idKey(raw)
}

const maxSafeInt = 1<<53 - 1

var canonicalInt = regexp.MustCompile(`^(0|-?[1-9][0-9]{0,15})$`)

// lineUnsafe names what in a client frame another line reader could split
// on, or what it could not decode: a carriage return (a line end to Python
// and to Node's readline), U+0085, U+2028 and U+2029 written raw, and
// invalid UTF-8.
func lineUnsafe(frame []byte) string {
	if bytes.IndexByte(frame, '\r') >= 0 {
		return "a carriage return inside a message"
	}
	if !utf8.Valid(frame) {
		return "invalid UTF-8"
	}
	if bytes.Contains(frame, []byte("\u0085")) || bytes.Contains(frame, []byte("\u2028")) || bytes.Contains(frame, []byte("\u2029")) {
		return "a raw line separator (U+0085, U+2028 or U+2029); escape it"
	}
	return ""
}
