// Package mcplist starts an MCP server over stdio, lists what it offers
// and stops it again: what 'delegateos policy init' and 'policy check
// --upstream' read of an upstream.
package mcplist

import (
	"bytes"
	"context"
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
)

// Options configures List.
type Options struct {
	// Timeout bounds starting, initializing and listing; zero means
	// DefaultTimeout.
	Timeout time.Duration
	// ClientName is the clientInfo name sent in initialize.
	ClientName string
}

// DefaultTimeout is how long List waits when Options.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// Listing is what an upstream offers.
type Listing struct {
	// Tools are every page of tools/list, in the server's order, as the
	// server defined them.
	Tools []mcp.Tool
}

// ToolNames returns the names of the tools, in order.
func (l *Listing) ToolNames() []string {
	names := make([]string, len(l.Tools))
	for i, t := range l.Tools {
		names[i] = t.Name
	}
	return names
}

// List starts argv as an MCP server over stdio, initializes it, lists
// every page of its tools and stops it. An error says, in one line, which
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
	l, step, err := initializeAndList(ctx, c, opts.ClientName)
	closeErr := c.Close()
	if err == nil {
		return l, nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
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
	return nil, errors.New(msg)
}

func initializeAndList(ctx context.Context, c *client.Client, clientName string) (*Listing, string, error) {
	req := mcp.InitializeRequest{}
	// The handshake every stdio server speaks today; the newer stateless
	// protocol would be probed first otherwise.
	req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	if clientName == "" {
		clientName = "delegateos"
	}
	req.Params.ClientInfo = mcp.Implementation{Name: clientName, Version: "0.1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		return nil, "initialize", err
	}
	// ListTools follows nextCursor to the last page.
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, "tools/list", err
	}
	return &Listing{Tools: res.Tools}, "", nil
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
