package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// demo is one run: its directory, its narration, and what the steps learn
// along the way.
type demo struct {
	cfg config
	dir string
	n   *narrator
	// b is B's MCP client, connected through the proxy from step 3 on.
	b *agent
	// spent is what B has spent under its first delegation, as the demo
	// counts it; the proxy's refusal in step 6 must agree.
	spent int64
	// firstLines holds the first line of each document B read, for its output.
	firstLines []string
}

// errNotNarrated marks a step that did not behave as the narration says.
var errNotNarrated = errors.New("did not behave as narrated")

// notNarrated is errNotNarrated with what happened instead.
func notNarrated(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errNotNarrated, fmt.Sprintf(format, args...))
}

// run runs the demo, narrating to w.
func run(ctx context.Context, cfg config, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, demoTimeout)
	defer cancel()
	dir, err := prepareDir(cfg.dir)
	if err != nil {
		return err
	}
	d := &demo{cfg: cfg, dir: dir, n: newNarrator(w, cfg.color)}
	start := time.Now()
	fmt.Fprintf(w, "delegateos demo: one delegation from start to finish, through `delegateos proxy` and a real MCP client.\n")
	fmt.Fprintf(w, "Every command below runs in %s\n", dir)
	steps := []func(context.Context) error{
		d.setUp, d.grant, d.attenuate, d.delegate, d.listTools, d.callTools,
		d.spendBudget, d.complete, d.showReputation, d.revoke,
	}
	for i, step := range steps {
		if err = step(ctx); err != nil {
			err = fmt.Errorf("step %d: %w", i, err)
			break
		}
	}
	if d.b != nil {
		// The proxy flushes its log and exits when B's session closes.
		if cerr := d.b.close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = d.summarize(time.Since(start))
	}
	if err != nil {
		return fmt.Errorf("%v\nThe demo's files so far are in %s", err, dir)
	}
	return nil
}

// demoTimeout bounds the whole run, so that a hung proxy fails the demo
// instead of stalling it.
const demoTimeout = 2 * time.Minute

// prepareDir makes the demo's directory: a new temporary one, or the given
// one, which must be empty.
func prepareDir(dir string) (string, error) {
	if dir == "" {
		return os.MkdirTemp("", "delegateos-demo-")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	if len(entries) > 0 {
		return "", fmt.Errorf("-dir %s is not empty", dir)
	}
	return filepath.Abs(dir)
}

// path is a file in the demo's directory.
func (d *demo) path(name string) string { return filepath.Join(d.dir, name) }
