package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/gate"
)

// agent is B's MCP client: an mcp-go client over stdio whose server is
// `delegateos proxy`, started as its subprocess.
type agent struct {
	c      *client.Client
	wire   *wire
	stderr *lockedBuffer
	ids    int
	// allowed and refused count the calls the gate let through and those
	// it refused, to hold against the proxy's log.
	allowed, refused int
}

// startAgent starts the proxy (path and args) in dir as an mcp-go stdio
// transport's subprocess, and initializes an MCP session through it.
func startAgent(ctx context.Context, dir, path string, args []string) (*agent, error) {
	a := &agent{stderr: &lockedBuffer{}}
	stdio := transport.NewStdioWithOptions(path, nil, args, transport.WithCommandFunc(
		func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
			cmd := exec.CommandContext(ctx, command, args...)
			cmd.Dir = dir
			cmd.Env = proxyEnv()
			// The proxy logs to its policy's log file; its standard error
			// has only a reason to give when it cannot start.
			cmd.Stderr = a.stderr
			return cmd, nil
		}))
	a.wire = &wire{BidirectionalInterface: stdio}
	// Wait for server/discover as long as ctx allows: on a loaded machine
	// mcp-go's default of 5s would fall back to the older protocol.
	a.c = client.NewClient(a.wire, client.WithDiscoverTimeout(-1))
	if err := a.c.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting the proxy: %v", err)
	}
	_, err := a.c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "agent-b", Version: "demo"},
	}})
	if err != nil {
		a.c.Close()
		return nil, fmt.Errorf("initializing an MCP session through the proxy: %v (proxy stderr: %s)", err, a.stderr.String())
	}
	return a, nil
}

// close ends the session; the proxy exits when its input closes.
func (a *agent) close() error {
	if err := a.c.Close(); err != nil {
		return fmt.Errorf("the proxy did not exit cleanly: %v %s", err, a.stderr.String())
	}
	return nil
}

// tools lists the tools the proxy shows this session.
func (a *agent) tools(ctx context.Context) ([]string, error) {
	res, err := a.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("tools/list: %v", err)
	}
	names := make([]string, len(res.Tools))
	for i, t := range res.Tools {
		names[i] = t.Name
	}
	return names, nil
}

// callResult is the outcome of one tools/call: the tool's answer, or the
// gate's refusal.
type callResult struct {
	// text is the first text item of the tool's answer.
	text    string
	isError bool
	// refusal is the JSON-RPC error the call was answered with, if any.
	refusal *refusal
}

// refusal is a JSON-RPC error answering a call; a gate's denial carries the
// type and detail of DelegateOS §11.2 in its data.
type refusal struct {
	code    int
	message string
	typ     string
	detail  string
}

func (r *refusal) String() string {
	return fmt.Sprintf("%d %s: %s: %s", r.code, r.message, r.typ, r.detail)
}

// call calls a tool. A JSON-RPC error is a refusal, not an error; err is
// for everything else (the session broke).
func (a *agent) call(ctx context.Context, tool string, args map[string]any) (callResult, error) {
	c := &errorCapture{}
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := a.c.CallTool(context.WithValue(ctx, errorCaptureKey{}, c), req)
	if rpc := c.get(); rpc != nil {
		a.refused++
		return callResult{refusal: newRefusal(rpc)}, nil
	}
	if err != nil {
		return callResult{}, fmt.Errorf("tools/call %s: %v", tool, err)
	}
	a.allowed++
	out := callResult{isError: res.IsError}
	for _, item := range res.Content {
		if tc, ok := mcp.AsTextContent(item); ok {
			out.text = tc.Text
			break
		}
	}
	return out, nil
}

func newRefusal(rpc *mcp.JSONRPCErrorDetails) *refusal {
	r := &refusal{code: rpc.Code, message: rpc.Message}
	var data struct {
		Type   string `json:"type"`
		Detail string `json:"detail"`
	}
	if b, err := json.Marshal(rpc.Data); err == nil && json.Unmarshal(b, &data) == nil {
		r.typ, r.detail = data.Type, data.Detail
	}
	return r
}

// delegate sends delegateos/delegate (DelegateOS §9.1).
func (a *agent) delegate(ctx context.Context, p gate.DelegateParams) (gate.DelegateResult, error) {
	var res gate.DelegateResult
	return res, a.request(ctx, gate.MethodDelegate, p, &res)
}

// complete sends delegateos/complete (§9.4) as a request, so the proxy
// answers with what it recorded.
func (a *agent) complete(ctx context.Context, p gate.CompleteParams) (gate.CompleteResult, error) {
	var res gate.CompleteResult
	return res, a.request(ctx, gate.MethodComplete, p, &res)
}

// request sends a delegateos/ request through the client's transport:
// mcp-go's client has no method for another protocol's messages. The ids
// are strings, so they never collide with the client's own numeric ones.
func (a *agent) request(ctx context.Context, method string, params, result any) error {
	a.ids++
	resp, err := a.wire.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION,
		ID: mcp.NewRequestId("demo-" + strconv.Itoa(a.ids)), Method: method, Params: params})
	if err != nil {
		return fmt.Errorf("%s: %v", method, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("%s: error %d: %s", method, resp.Error.Code, resp.Error.Message)
	}
	if err := json.Unmarshal(resp.Result, result); err != nil {
		return fmt.Errorf("%s: the result %s: %v", method, resp.Result, err)
	}
	return nil
}

// wire sits between mcp-go's client and its stdio transport and keeps the
// JSON-RPC error a call was answered with: the client turns it into a Go
// error and drops its data, which holds the denial's type and detail.
type wire struct {
	transport.BidirectionalInterface
}

type errorCaptureKey struct{}

// errorCapture travels in a call's context to the wire.
type errorCapture struct {
	mu  sync.Mutex
	rpc *mcp.JSONRPCErrorDetails
}

func (c *errorCapture) get() *mcp.JSONRPCErrorDetails {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rpc
}

func (w *wire) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := w.BidirectionalInterface.SendRequest(ctx, req)
	if c, ok := ctx.Value(errorCaptureKey{}).(*errorCapture); ok && resp != nil && resp.Error != nil {
		c.mu.Lock()
		c.rpc = resp.Error
		c.mu.Unlock()
	}
	return resp, err
}

// lockedBuffer collects a subprocess's standard error, which exec copies in
// a goroutine of its own.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(l.b.String())
}
