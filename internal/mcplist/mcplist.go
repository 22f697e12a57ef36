// Package mcplist starts an MCP server over stdio, lists what it offers
// and stops it again: what 'delegateos policy init', 'policy check
// --upstream' and 'pin' read of an upstream.
package mcplist

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/delegateos/delegateos/internal/mcpdef"
	"github.com/delegateos/delegateos/internal/strictjson"
)

// Options configures List.
type Options struct {
	// Timeout bounds starting, initializing and listing; zero means
	// DefaultTimeout.
	Timeout time.Duration
	// ClientName is the clientInfo name sent in initialize.
	ClientName string
	// Definitions also lists the prompts and the resource templates, of a
	// server that declares them (Listing.Raw).
	Definitions bool
}

// DefaultTimeout is how long List waits when Options.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// Listing is what an upstream offers.
type Listing struct {
	// Tools are every page of tools/list, in the server's order, as the
	// server defined them.
	Tools []mcp.Tool
	// Raw holds the entries of every page of each list, in the server's
	// order, byte for byte as the server wrote them: the tools, and with
	// Options.Definitions the prompts and resource templates.
	Raw [mcpdef.NumKinds][]json.RawMessage
}

// maxPages bounds the pages of one list.
const maxPages = 10000

// ToolNames returns the names of the tools, in order.
func (l *Listing) ToolNames() []string {
	names := make([]string, len(l.Tools))
	for i, t := range l.Tools {
		names[i] = t.Name
	}
	return names
}

// List starts argv as an MCP server over stdio, initializes it, lists
// every page of its tools (and, with Options.Definitions, of its prompts
// and resource templates) and stops it. An error says, in one line, which
// step failed and how: the server could not start, exited (with its last
// line on stderr), answered with an error, or did not answer in time.
func List(argv []string, opts Options) (*Listing, error) {
	if len(argv) == 0 {
		return nil, errors.New("no upstream command")
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	name := fmt.Sprintf("upstream %q", clip(strings.Join(argv, " ")))
	stderr := &tailBuffer{max: 4 << 10}
	c, err := client.NewStdioMCPClientWithOptions(argv[0], nil, argv[1:],
		transport.WithCommandFunc(func(_ context.Context, command string, env, args []string) (*exec.Cmd, error) {
			cmd := exec.Command(command, args...)
			cmd.Env = append(os.Environ(), env...)
			// exec copies stderr here, and Wait (in Close) waits for the copy,
			// so the tail is complete when an error is reported.
			cmd.Stderr = stderr
			cmd.WaitDelay = time.Second
			return cmd, nil
		}),
		transport.WithCommandLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, fmt.Errorf("%s could not start: %v", name, startError(err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	l, step, err := initializeAndList(ctx, c, opts)
	closeErr := c.Close()
	if err == nil {
		return l, nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		if step == "initialize" {
			return nil, fmt.Errorf("%s did not answer initialize within %s: %s, or give it longer (--timeout)", name, timeout, notMCP)
		}
		return nil, fmt.Errorf("%s did not answer %s within %s", name, step, timeout)
	}
	msg := fmt.Sprintf("%s failed during %s: %v", name, step, err)
	var exit *exec.ExitError
	if errors.As(closeErr, &exit) {
		how := "ended by " + exit.String()
		if exit.Exited() {
			how = fmt.Sprintf("exited with status %d", exit.ExitCode())
		}
		msg = fmt.Sprintf("%s %s during %s", name, how, step)
	}
	if last := stderr.lastLine(); last != "" {
		msg += fmt.Sprintf("; its last line on stderr: %q", last)
	}
	if step == "initialize" && (exit == nil || exit.ExitCode() == 0) {
		// It did not fail: it answered, or ended, as no MCP server does.
		msg += "; " + notMCP
	}
	return nil, errors.New(msg)
}

// notMCP is what a command that does not complete MCP's initialize most
// likely is, and what to do.
const notMCP = "it does not speak MCP over standard input and output, so it is not an MCP server, or needs a flag to serve over stdio (such as --stdio); check the command after --"

func initializeAndList(ctx context.Context, c *client.Client, opts Options) (*Listing, string, error) {
	req := mcp.InitializeRequest{}
	// The handshake every stdio server speaks today; the newer stateless
	// protocol would be probed first otherwise.
	req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	clientName := opts.ClientName
	if clientName == "" {
		clientName = "delegateos"
	}
	req.Params.ClientInfo = mcp.Implementation{Name: clientName, Version: "0.1"}
	init, err := c.Initialize(ctx, req)
	if err != nil {
		return nil, "initialize", err
	}
	l := &Listing{}
	lister := rawLister{tr: c.GetTransport()}
	if l.Raw[mcpdef.Tool], err = lister.list(ctx, mcpdef.Tool); err != nil {
		return nil, "tools/list", err
	}
	for _, raw := range l.Raw[mcpdef.Tool] {
		var t mcp.Tool
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, "tools/list", fmt.Errorf("a listed tool cannot be read: %v", err)
		}
		l.Tools = append(l.Tools, t)
	}
	if !opts.Definitions {
		return l, "", nil
	}
	caps := init.Capabilities
	if caps.Prompts != nil {
		if l.Raw[mcpdef.Prompt], err = lister.list(ctx, mcpdef.Prompt); err != nil {
			return nil, "prompts/list", err
		}
	}
	if caps.Resources != nil {
		if l.Raw[mcpdef.ResourceTemplate], err = lister.list(ctx, mcpdef.ResourceTemplate); err != nil {
			return nil, "resources/templates/list", err
		}
	}
	return l, "", nil
}

// rawLister sends list requests on the client's transport itself, so that
// each entry is kept as the server wrote it (mcp-go's typed results drop
// what their structs do not hold). Its ids are strings, which the client's
// own (numbers) never equal.
type rawLister struct {
	tr  transport.Interface
	seq int
}

// list follows nextCursor from the first page to the last, refusing a
// result that a client could read two ways (a member given twice, or the
// entries' member in other letter case) and a cursor seen before.
func (r *rawLister) list(ctx context.Context, k mcpdef.Kind) ([]json.RawMessage, error) {
	var out []json.RawMessage
	seen := map[string]bool{}
	cursor := ""
	for range maxPages {
		r.seq++
		req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(fmt.Sprintf("delegateos-list-%d", r.seq)), Method: k.ListMethod()}
		if cursor != "" {
			req.Params = map[string]string{"cursor": cursor}
		}
		resp, err := r.tr.SendRequest(ctx, req)
		if err != nil {
			return nil, err
		}
		if resp.Error != nil {
			return nil, resp.Error.AsError()
		}
		if err := strictjson.Check(resp.Result); err != nil {
			return nil, fmt.Errorf("the result cannot be read one way only: %v", err)
		}
		var page map[string]json.RawMessage
		if json.Unmarshal(resp.Result, &page) != nil || page == nil {
			return nil, errors.New("the result is not a JSON object")
		}
		for name := range page {
			if name != k.ResultMember() && strings.EqualFold(name, k.ResultMember()) || name != "nextCursor" && strings.EqualFold(name, "nextCursor") {
				return nil, fmt.Errorf("the result has a member %q, which a client could read as %q", name, strings.ToLower(name))
			}
		}
		var entries []json.RawMessage
		if raw, ok := page[k.ResultMember()]; ok && json.Unmarshal(raw, &entries) != nil {
			return nil, fmt.Errorf("the result's %s is not a list", k.ResultMember())
		}
		out = append(out, entries...)
		var next string
		if raw, ok := page["nextCursor"]; ok && string(raw) != "null" && json.Unmarshal(raw, &next) != nil {
			return nil, errors.New("the result's nextCursor is not a string")
		}
		if next == "" {
			return out, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("the server gave the cursor %q twice", clip(next))
		}
		seen[next] = true
		cursor = next
	}
	return nil, fmt.Errorf("more than %d pages", maxPages)
}

// startError digs the operating system's reason out of mcp-go's wrapping.
func startError(err error) error {
	var ee *exec.Error
	var pe *fs.PathError
	switch {
	case errors.As(err, &ee):
		return ee
	case errors.As(err, &pe):
		return pe
	}
	return err
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// lastLine is the last non-blank line written, trimmed to one line.
func (t *tailBuffer) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := bytes.Split(bytes.TrimSpace(t.buf), []byte("\n"))
	return clip(strings.TrimSpace(string(lines[len(lines)-1])))
}
