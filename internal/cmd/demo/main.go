// Command demo is what `make demo` runs: one delegation through delegateos
// from start to finish, narrated step by step.
//
// In a new directory it creates keys for a root operator and two agents (A
// and B) with the delegateos CLI, writes a small document tree and a proxy
// policy, and then plays B's MCP client: an mcp-go stdio client that starts
// `delegateos proxy` (the real binary) in front of the docserver example.
// What a person would do by hand (keys, tokens, contracts, attestations,
// revocation, reading the chain and the reputation workspace) is done with
// the CLI and shown as the command line; what an agent framework would do
// (delegate, list tools, call them, complete) goes over MCP and is shown as
// the message and the key lines of the answer.
//
// The demo doubles as a smoke test: when a step does not behave as the
// narration says, it stops with a message saying which and exits 1. The
// directory is left behind either way, and its path is printed.
//
// Usage:
//
//	demo [-bin DIR] [-dir DIR]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	os.Exit(mainStatus(os.Args[1:], os.Stdout, os.Stderr))
}

// config is what the command line chooses.
type config struct {
	// bin holds the delegateos and docserver binaries.
	bin string
	// dir is the demo's directory: created if missing, and it must be
	// empty; "" makes a new one under the system's temporary directory.
	dir string
	// color makes headings bold.
	color bool
}

func mainStatus(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 2
	}
	cfg.color = isTerminal(stdout) && os.Getenv("NO_COLOR") == ""
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, stdout); err != nil {
		fmt.Fprintf(stderr, "\ndemo: FAILED: %v\n", err)
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.bin, "bin", "", "directory holding the delegateos and docserver binaries (default: this program's directory)")
	fs.StringVar(&cfg.dir, "dir", "", "directory to run the demo in, created if missing and left behind (default: a new temporary directory)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return config{}, fmt.Errorf("cannot find this program's directory (give -bin): %v", err)
		}
		cfg.bin = filepath.Dir(exe)
	}
	// The commands run in the demo's directory, so a relative -bin would
	// point elsewhere there.
	bin, err := filepath.Abs(cfg.bin)
	if err != nil {
		return config{}, err
	}
	cfg.bin = bin
	for _, name := range []string{delegateosBinary, docserverBinary} {
		if _, err := os.Stat(filepath.Join(cfg.bin, name)); err != nil {
			return config{}, fmt.Errorf("-bin %s: %v (make demo builds both)", cfg.bin, err)
		}
	}
	return cfg, nil
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
