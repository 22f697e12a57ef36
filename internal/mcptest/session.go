package mcptest

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// SessionOptions are how Connect sets up the client.
type SessionOptions struct {
	// Legacy pins protocol 2025-11-25, where server-to-client requests
	// (sampling, roots, elicitation) cross the wire as requests. Otherwise
	// mcp-go tries 2026-07-28 first.
	Legacy bool
	// Version is the protocol version the handshake must end on: by
	// default 2026-07-28, or 2025-11-25 if Legacy. A server that speaks
	// only 2025-11-25 needs it set without Legacy.
	Version string
	// ClientOptions are passed to mcp-go's client: handlers for requests
	// from the server, say.
	ClientOptions []client.ClientOption
}

// Session is an mcp-go client connected to a Process, initialized.
type Session struct {
	*client.Client
	// Wire is the transport under the client: it adds extra params to
	// tools/call frames, records the requests the server sent, and can
	// send any request.
	Wire *Wire
	// Process is what the session is connected to.
	Process *Process

	mu    sync.Mutex
	notes []mcp.JSONRPCNotification
}

// Connect connects mcp-go's client to the process's stdin and stdout and
// performs the handshake, failing the test unless it negotiates the
// version o asks for. The session is closed when the test ends; Close
// closes the process's stdin.
func (p *Process) Connect(o SessionOptions) *Session {
	t := p.t
	t.Helper()
	want := o.Version
	if want == "" {
		want = mcp.ProtocolVersion20260728
		if o.Legacy {
			want = mcp.ProtocolVersion20251125
		}
	}
	opts := slices.Clone(o.ClientOptions)
	if o.Legacy {
		opts = append(opts, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	} else if mcp.IsModernProtocol(want) {
		// mcp-go falls back to 2025-11-25 if server/discover takes over
		// 5s, which a loaded machine can take: wait as long as the test.
		opts = append(opts, client.WithDiscoverTimeout(-1))
	}
	wire := &Wire{BidirectionalInterface: transport.NewIO(p.Stdout, p.Stdin, nil)}
	s := &Session{Client: client.NewClient(wire, opts...), Wire: wire, Process: p}
	t.Cleanup(func() { _ = s.Close() })
	ctx := Context(t)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s.OnNotification(func(n mcp.JSONRPCNotification) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.notes = append(s.notes, n)
	})
	res, err := s.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "mcptest", Version: "0"},
	}})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if res.ProtocolVersion != want || s.ProtocolVersion() != want {
		t.Fatalf("negotiated protocol %q (the client says %q), want %q", res.ProtocolVersion, s.ProtocolVersion(), want)
	}
	return s
}

// Notifications returns the notifications received so far with method.
func (s *Session) Notifications(method string) []mcp.JSONRPCNotification {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []mcp.JSONRPCNotification
	for _, n := range s.notes {
		if n.Method == method {
			out = append(out, n)
		}
	}
	return out
}

// Progress returns the params of the notifications/progress received so
// far for token, or for any token if token is nil. A numeric token arrives
// decoded as float64.
func (s *Session) Progress(token any) []map[string]any {
	var out []map[string]any
	for _, n := range s.Notifications(string(mcp.MethodNotificationProgress)) {
		if token == nil || n.Params.AdditionalFields["progressToken"] == token {
			out = append(out, n.Params.AdditionalFields)
		}
	}
	return out
}

// ToolPages lists the tools page by page, following the cursors to the
// end, and returns the pages.
func (s *Session) ToolPages(t testing.TB) [][]mcp.Tool {
	t.Helper()
	ctx := Context(t)
	var pages [][]mcp.Tool
	var req mcp.ListToolsRequest
	for {
		page, err := s.ListToolsByPage(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, page.Tools)
		if page.NextCursor == "" {
			return pages
		}
		req.Params.Cursor = page.NextCursor
	}
}

// SetExtraParams adds extra top-level params to every later tools/call
// frame of the session (nil: none), as a client that sends its own
// _delegateos with every call.
func (s *Session) SetExtraParams(extra map[string]any) {
	s.Wire.mu.Lock()
	defer s.Wire.mu.Unlock()
	s.Wire.extra = extra
}

// Result is the outcome of one tools/call.
type Result struct {
	// Res is the call's result, if it had one.
	Res *mcp.CallToolResult
	// Err is the error mcp-go's client returned.
	Err error
	// RPC is the JSON-RPC error the call was answered with, if any.
	RPC *mcp.JSONRPCErrorDetails
	// Frames is how many tools/call requests the call took (2026-07-28
	// sends the call again with the client's input).
	Frames int
}

// OK fails the test unless the call succeeded and the tool did not fail,
// and returns the result; what names the call in the message.
func (r Result) OK(t testing.TB, what string) *mcp.CallToolResult {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("%s: %v (JSON-RPC error %+v)", what, r.Err, r.RPC)
	}
	if r.Res.IsError {
		t.Fatalf("%s: the tool failed: %+v", what, r.Res.Content)
	}
	return r.Res
}

// CallRequest is a tools/call of name with args.
func CallRequest(name string, args map[string]any) mcp.CallToolRequest {
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	return req
}

// CallExtra sends req with extra top-level params (such as _delegateos)
// added to its tools/call frames.
func (s *Session) CallExtra(ctx context.Context, req mcp.CallToolRequest, extra map[string]any) Result {
	c := &callCapture{extra: extra}
	res, err := s.CallTool(context.WithValue(ctx, captureKey{}, c), req)
	c.mu.Lock()
	defer c.mu.Unlock()
	return Result{Res: res, Err: err, RPC: c.rpc, Frames: c.frames}
}

// Call calls the tool name with args, under Context(t).
func (s *Session) Call(t testing.TB, name string, args map[string]any) Result {
	return s.CallExtra(Context(t), CallRequest(name, args), nil)
}

// CallAs calls the tool name presenting tok in params._delegateos.
func (s *Session) CallAs(t testing.TB, tok string, name string, args map[string]any) Result {
	return s.CallExtra(Context(t), CallRequest(name, args), TokenParams(tok))
}

// TokenParams is the extra params that carry tok (DelegateOS §11.1).
func TokenParams(tok string) map[string]any {
	return map[string]any{"_delegateos": map[string]any{"dct": tok}}
}

// Text returns the text of content item i of res, failing the test if
// there is none.
func Text(t testing.TB, res *mcp.CallToolResult, i int) string {
	t.Helper()
	if len(res.Content) <= i {
		t.Fatalf("result has %d content items, want item %d: %+v", len(res.Content), i, res)
	}
	tc, ok := mcp.AsTextContent(res.Content[i])
	if !ok {
		t.Fatalf("content %d is %T, not text", i, res.Content[i])
	}
	return tc.Text
}

// callCapture travels in a call's context to the Wire.
type callCapture struct {
	extra map[string]any

	mu     sync.Mutex
	rpc    *mcp.JSONRPCErrorDetails
	frames int
}

type captureKey struct{}

// Wire sits between mcp-go's client and its stdio transport. It adds extra
// params to tools/call frames (mcp.CallToolParams has no field for
// _delegateos), keeps the JSON-RPC error a call was answered with, and
// records the requests the server sent to the client. Its SendRequest
// sends any request, such as the proxy's own delegateos/ methods.
type Wire struct {
	transport.BidirectionalInterface

	mu       sync.Mutex
	extra    map[string]any
	incoming []string
}

// SendRequest sends req, and for a tools/call adds the session's and the
// call's extra params and records the outcome.
func (w *Wire) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	c, _ := ctx.Value(captureKey{}).(*callCapture)
	if req.Method == string(mcp.MethodToolsCall) {
		w.mu.Lock()
		extra := maps.Clone(w.extra)
		w.mu.Unlock()
		if c != nil {
			if extra == nil {
				extra = map[string]any{}
			}
			maps.Copy(extra, c.extra)
			c.mu.Lock()
			c.frames++
			c.mu.Unlock()
		}
		if len(extra) > 0 {
			params, err := withExtraParams(req.Params, extra)
			if err != nil {
				return nil, err
			}
			req.Params = params
		}
	}
	resp, err := w.BidirectionalInterface.SendRequest(ctx, req)
	if c != nil && resp != nil && resp.Error != nil {
		c.mu.Lock()
		c.rpc = resp.Error
		c.mu.Unlock()
	}
	return resp, err
}

// withExtraParams re-encodes params, a struct or a map depending on the
// protocol era, as an object with extra members.
func withExtraParams(params any, extra map[string]any) (map[string]json.RawMessage, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	for k, v := range extra {
		if fields[k], err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	return fields, nil
}

// SetRequestHandler records the server-to-client requests that reach the
// client.
func (w *Wire) SetRequestHandler(handler transport.RequestHandler) {
	w.BidirectionalInterface.SetRequestHandler(func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		w.mu.Lock()
		w.incoming = append(w.incoming, req.Method)
		w.mu.Unlock()
		return handler(ctx, req)
	})
}

// IncomingMethods are the methods of the requests the server sent to the
// client so far, in order.
func (w *Wire) IncomingMethods() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.incoming)
}
