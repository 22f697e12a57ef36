package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// costMetaKey is the result _meta key through which an upstream reports what
// a call actually cost.
const costMetaKey = "delegateos/costMicrocents"

// inputID names the one input request each of sample, roots and elicit makes.
const inputID = "answer"

// diagnosticTools exercise the protocol features a relay must carry. They
// exist for tests, so they favour being predictable over being useful.
type diagnosticTools struct {
	log *slog.Logger
	// exit ends the process for the crash tool.
	exit func(code int)
}

func (t diagnosticTools) register(s *server.MCPServer) {
	s.AddTool(mcp.NewTool("echo",
		mcp.WithDescription("Return text, then a JSON object with the arguments and the raw tools/call params the server received."),
		mcp.WithString("text", mcp.Required()),
	), t.echo)
	s.AddTool(mcp.NewTool("slow",
		mcp.WithDescription("Take steps × delay_ms, sending notifications/progress after each step when the call has a progressToken. Stops when cancelled."),
		mcp.WithInteger("steps", mcp.Min(0), mcp.Max(maxSlowSteps), mcp.DefaultNumber(5)),
		mcp.WithInteger("delay_ms", mcp.Min(0), mcp.Max(maxSlowDelayMs), mcp.DefaultNumber(100)),
	), t.slow)
	s.AddTool(mcp.NewTool("sample",
		mcp.WithDescription("Ask the client's model (sampling/createMessage) to answer prompt; return its text."),
		mcp.WithString("prompt", mcp.Required()),
	), t.sample)
	s.AddTool(mcp.NewTool("roots",
		mcp.WithDescription("Ask the client for its roots (roots/list); return them as JSON."),
	), t.roots)
	s.AddTool(mcp.NewTool("elicit",
		mcp.WithDescription("Ask the client's user (elicitation/create) for a string field \"answer\"; return the reply as JSON."),
		mcp.WithString("message", mcp.Required()),
	), t.elicit)
	s.AddTool(mcp.NewTool("big",
		mcp.WithDescription(fmt.Sprintf("Return a text result of exactly bytes bytes (at most %d).", maxBigBytes)),
		mcp.WithInteger("bytes", mcp.Required(), mcp.Min(0), mcp.Max(maxBigBytes)),
	), t.big)
	s.AddTool(mcp.NewTool("crash",
		mcp.WithDescription("Exit the server at once with status 3, without answering."),
	), t.crash)
	s.AddTool(mcp.NewTool("costly",
		mcp.WithDescription("Return a result whose _meta reports the call's actual cost: {\""+costMetaKey+"\": cost}."),
		mcp.WithInteger("cost", mcp.Required(), mcp.Min(0)),
	), t.costly)
	s.AddTool(mcp.NewTool("notify_list_changed",
		mcp.WithDescription("Send notifications/tools/list_changed, then return."),
	), t.notifyListChanged)
	s.AddTool(mcp.NewTool("probe",
		mcp.WithDescription(fmt.Sprintf("Report who the server runs as (uid, gid, groups, HOME, working directory, parent process) and try to read each of paths, anywhere on the machine and not only in the document root (at most %d bytes of each): what a server in the proxy's place can reach.", maxProbeBytes)),
		mcp.WithArray("paths", mcp.WithStringItems()),
	), t.probe)
}

// probeRead is what probe found at one path: its first bytes, or why it
// could not be read.
type probeRead struct {
	Path  string `json:"path"`
	Data  string `json:"data,omitempty"`
	Error string `json:"error,omitempty"`
}

func (t diagnosticTools) probe(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Paths []string `json:"paths"`
	}
	if err := req.BindArguments(&args); err != nil {
		return mcp.NewToolResultError("paths must be a list of strings"), nil
	}
	if len(args.Paths) > maxProbePaths {
		return mcp.NewToolResultError(fmt.Sprintf("at most %d paths", maxProbePaths)), nil
	}
	groups, _ := os.Getgroups()
	cwd, err := os.Getwd()
	if err != nil {
		cwd = "error: " + err.Error()
	}
	out := struct {
		UID    int         `json:"uid"`
		GID    int         `json:"gid"`
		Groups []int       `json:"groups"`
		Home   string      `json:"home"`
		Cwd    string      `json:"cwd"`
		PPID   int         `json:"ppid"`
		Reads  []probeRead `json:"reads"`
	}{UID: os.Getuid(), GID: os.Getgid(), Groups: groups, Home: os.Getenv("HOME"), Cwd: cwd, PPID: os.Getppid(), Reads: []probeRead{}}
	for _, p := range args.Paths {
		r := probeRead{Path: p}
		if data, err := readPrefix(p, maxProbeBytes); err != nil {
			r.Error = err.Error()
		} else {
			r.Data = string(data)
		}
		out.Reads = append(out.Reads, r)
	}
	t.log.Info("probe", "uid", out.UID, "paths", len(args.Paths))
	return jsonResult(out)
}

// readPrefix reads at most n bytes of a file.
func readPrefix(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

func (t diagnosticTools) echo(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	text, err := req.RequireString("text")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	args := req.Params.RawArguments
	if len(args) == 0 {
		if args, err = json.Marshal(req.Params.Arguments); err != nil {
			return nil, err
		}
	}
	params := rawParams(req)
	if params == nil {
		params = json.RawMessage("null")
	}
	seen, err := json.Marshal(struct {
		Arguments json.RawMessage `json:"arguments"`
		Params    json.RawMessage `json:"params"`
	}{args, params})
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{
		mcp.NewTextContent(text),
		mcp.NewTextContent(string(seen)),
	}}, nil
}

func (t diagnosticTools) slow(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	steps := req.GetInt("steps", 5)
	delay := req.GetInt("delay_ms", 100)
	if steps < 0 || steps > maxSlowSteps || delay < 0 || delay > maxSlowDelayMs {
		return mcp.NewToolResultError(fmt.Sprintf("steps must be 0..%d and delay_ms 0..%d", maxSlowSteps, maxSlowDelayMs)), nil
	}
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	srv := server.ServerFromContext(ctx)
	timer := time.NewTimer(time.Duration(delay) * time.Millisecond)
	defer timer.Stop()
	for step := 1; step <= steps; step++ {
		select {
		case <-ctx.Done():
			t.log.Info("slow: cancelled", "completed", step-1, "steps", steps)
			return nil, ctx.Err()
		case <-timer.C:
			timer.Reset(time.Duration(delay) * time.Millisecond)
		}
		if token == nil {
			continue
		}
		err := srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
			"progressToken": token,
			"progress":      step,
			"total":         steps,
			"message":       fmt.Sprintf("step %d of %d", step, steps),
		})
		if err != nil {
			t.log.Warn("slow: progress notification not sent", "step", step, "err", err)
		}
	}
	return mcp.NewToolResultText(fmt.Sprintf("done %d", steps)), nil
}

// sample, roots and elicit ask the client through mcp-go's multi round-trip
// builder rather than RequestSampling and friends. For a client on protocol
// 2026-07-28 the first call returns resultType "input_required" and the client
// retries with the answer; for an older client mcp-go sends the classic
// server-to-client request (sampling/createMessage, roots/list,
// elicitation/create) and re-invokes the handler. One handler serves both.

func (t diagnosticTools) sample(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	prompt, err := req.RequireString("prompt")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	answer := server.SamplingResponse(req.Params.InputResponses, inputID)
	if answer == nil {
		return server.NewInputRequestBuilder("").Sample(inputID, mcp.CreateMessageParams{
			Messages: []mcp.SamplingMessage{{
				Role:    mcp.RoleUser,
				Content: mcp.NewTextContent(prompt),
			}},
			MaxTokens: 256,
		}).ToolResult(), nil
	}
	text, err := samplingText(answer.Content)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(text), nil
}

// samplingText extracts the text of a sampling answer, which may arrive typed
// or as decoded JSON, as one block or several.
func samplingText(content any) (string, error) {
	parsed, err := mcp.ParseSamplingContent(content)
	if err != nil {
		return "", fmt.Errorf("sampling answer: %w", err)
	}
	var blocks []mcp.Content
	switch c := parsed.(type) {
	case []mcp.Content:
		blocks = c
	case mcp.Content:
		blocks = []mcp.Content{c}
	default:
		return "", fmt.Errorf("sampling answer: unexpected content %T", parsed)
	}
	var b strings.Builder
	for _, block := range blocks {
		switch tc := block.(type) {
		case mcp.TextContent:
			b.WriteString(tc.Text)
		case *mcp.TextContent:
			b.WriteString(tc.Text)
		default:
			return "", fmt.Errorf("sampling answer: %T is not text", block)
		}
	}
	return b.String(), nil
}

func (t diagnosticTools) roots(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	answer := server.RootsResponse(req.Params.InputResponses, inputID)
	if answer == nil {
		return server.NewInputRequestBuilder("").Roots(inputID).ToolResult(), nil
	}
	roots := answer.Roots
	if roots == nil {
		roots = []mcp.Root{}
	}
	return jsonResult(map[string]any{"roots": roots})
}

func (t diagnosticTools) elicit(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	message, err := req.RequireString("message")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	answer := server.ElicitationResponse(req.Params.InputResponses, inputID)
	if answer == nil {
		return server.NewInputRequestBuilder("").Elicit(inputID, mcp.ElicitationParams{
			Message: message,
			RequestedSchema: map[string]any{
				"type":       "object",
				"properties": map[string]any{"answer": map[string]any{"type": "string"}},
				"required":   []string{"answer"},
			},
		}).ToolResult(), nil
	}
	return jsonResult(map[string]any{"action": answer.Action, "content": answer.Content})
}

func (t diagnosticTools) big(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	n, err := req.RequireInt("bytes")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	if n < 0 || n > maxBigBytes {
		return mcp.NewToolResultError(fmt.Sprintf("bytes must be 0..%d", maxBigBytes)), nil
	}
	return mcp.NewToolResultText(bigText(n)), nil
}

// bigText is n bytes of printable ASCII that JSON does not escape, so the
// frame carrying it is n bytes plus a small envelope.
func bigText(n int) string {
	const pattern = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\n"
	var b strings.Builder
	b.Grow(n)
	for b.Len()+len(pattern) <= n {
		b.WriteString(pattern)
	}
	b.WriteString(pattern[:n-b.Len()])
	return b.String()
}

func (t diagnosticTools) crash(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	t.log.Warn("crash: exiting with status 3 as asked")
	t.exit(3)
	return nil, fmt.Errorf("crash: exit returned")
}

func (t diagnosticTools) costly(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Cost json.RawMessage `json:"cost"`
	}
	// Parsing the raw number keeps costs above 2^53 exact and refuses a
	// quoted "7" that json.Number would accept.
	err := req.BindArguments(&args)
	cost, perr := strconv.ParseInt(string(args.Cost), 10, 64)
	if err != nil || perr != nil || cost < 0 {
		return mcp.NewToolResultError("cost must be a non-negative integer"), nil
	}
	result := mcp.NewToolResultText(fmt.Sprintf("cost %d", cost))
	result.Meta = &mcp.Meta{AdditionalFields: map[string]any{costMetaKey: cost}}
	return result, nil
}

func (t diagnosticTools) notifyListChanged(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	method := string(mcp.MethodNotificationToolsListChanged)
	if err := server.ServerFromContext(ctx).SendNotificationToClient(ctx, method, nil); err != nil {
		return mcp.NewToolResultError(fmt.Sprintf("%s not sent: %v", method, err)), nil
	}
	return mcp.NewToolResultText("sent " + method), nil
}

func jsonResult(v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return mcp.NewToolResultText(string(b)), nil
}
