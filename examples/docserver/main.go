package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

const (
	serverName    = "docserver"
	serverVersion = "0.1.0"
)

// config is what the command line chooses.
type config struct {
	root        string
	diagnostics bool
	pageSize    int
	// describe and rename change definitions from the start (see
	// redefinitions).
	describe, rename nameValue
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run serves one client on stdin/stdout and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "docserver: %v\n", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	docs, err := openDocRoot(cfg.root)
	if err != nil {
		fmt.Fprintf(stderr, "docserver: cannot serve --root: %v\n", err)
		return 1
	}
	defer docs.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := newServer(cfg, docs, logger, os.Exit)
	if err != nil {
		fmt.Fprintf(stderr, "docserver: %v\n", err)
		return 2
	}
	stdio := server.NewStdioServer(srv)
	stdio.SetErrorLogger(log.New(stderr, "docserver: mcp-go: ", log.LstdFlags))
	server.WithWorkerPoolSize(stdioWorkers)(stdio)
	server.WithQueueSize(stdioQueue)(stdio)
	logger.Info("serving", "root", cfg.root, "diagnostics", cfg.diagnostics, "page_size", cfg.pageSize)
	if err := stdio.Listen(ctx, stdin, stdout); err != nil && !errors.Is(err, context.Canceled) {
		logger.Error("stdio session ended", "err", err)
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet(serverName, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.root, "root", "", "directory to serve (required); tool paths like /project/a.md resolve inside it")
	fs.BoolVar(&cfg.diagnostics, "diagnostics", false, "also offer the protocol test tools (echo, slow, sample, roots, elicit, big, crash, costly, notify_list_changed, probe, redefine)")
	fs.IntVar(&cfg.pageSize, "page-size", 0, "tools per tools/list page; 0 returns every tool on one page")
	fs.Var(&cfg.describe, "describe", "NAME=TEXT: list the tool, prompt or resource template NAME with the description TEXT instead (repeatable)")
	fs.Var(&cfg.rename, "rename", "OLD=NEW: offer the tool OLD as NEW (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: docserver --root DIR [--diagnostics] [--page-size N] [--describe NAME=TEXT]... [--rename OLD=NEW]...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	switch {
	case fs.NArg() > 0:
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	case cfg.root == "":
		return config{}, errors.New("--root DIR is required")
	case cfg.pageSize < 0:
		return config{}, errors.New("--page-size must not be negative")
	}
	return cfg, nil
}

// newServer builds the MCP server; exit is what the crash tool calls.
func newServer(cfg config, docs *docRoot, logger *slog.Logger, exit func(int)) (*server.MCPServer, error) {
	hooks := &server.Hooks{}
	resources := newDocResources(docs)
	opts := []server.ServerOption{
		server.WithToolCapabilities(true),
		server.WithResourceCapabilities(true, false),
		server.WithPromptCapabilities(false),
		server.WithCompletions(),
		server.WithPromptCompletionProvider(resources),
		server.WithResourceCompletionProvider(resources),
		server.WithHooks(hooks),
		server.WithToolHandlerMiddleware(logCalls(logger)),
		server.WithRecovery(),
	}
	if cfg.pageSize > 0 {
		opts = append(opts, server.WithPaginationLimit(cfg.pageSize))
	}
	s := server.NewMCPServer(serverName, serverVersion, opts...)
	docTools{docs: docs}.register(s)
	resources.register(s)
	redefs := &redefinitions{}
	redefs.install(hooks)
	if cfg.diagnostics {
		(&rawParamsRecorder{tool: "echo"}).install(hooks)
		diagnosticTools{log: logger, exit: exit}.register(s)
		redefs.register(s)
	}
	if err := redefs.apply(s, cfg.describe, cfg.rename); err != nil {
		return nil, err
	}
	return s, nil
}

// logCalls writes one line per tool call to the log, which is all a person
// reading the proxy's log has to see what the upstream did.
func logCalls(logger *slog.Logger) server.ToolHandlerMiddleware {
	return func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
		return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			start := time.Now()
			result, err := next(ctx, req)
			attrs := []any{"tool", req.Params.Name, "took", time.Since(start)}
			switch {
			case err != nil:
				attrs = append(attrs, "outcome", "error", "err", err)
			case result != nil && result.NeedsInput():
				attrs = append(attrs, "outcome", "input_required")
			case result != nil && result.IsError:
				attrs = append(attrs, "outcome", "tool_error")
			default:
				attrs = append(attrs, "outcome", "ok")
			}
			logger.Info("tools/call", attrs...)
			return result, err
		}
	}
}
