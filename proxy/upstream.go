package proxy

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"

	"go.uber.org/zap"
)

// UpstreamConn connects to an upstream that is not a process of the
// relay's own (Config.UpstreamConn). It returns what the upstream sends
// (newline-delimited frames, read until EOF), where the relay writes to it
// (closed at the client's EOF: the upstream should then end), and wait,
// which returns once the upstream has ended and nothing more will be read
// from r. Cancelling ctx ends the upstream at once, as a signal ends a
// process: r then reaches EOF and wait returns.
type UpstreamConn func(ctx context.Context) (r io.ReadCloser, w io.WriteCloser, wait func() error, err error)

// upstream is the running upstream, a process or a connection, as Run
// drives it.
type upstream struct {
	in     io.WriteCloser
	out    io.Reader
	stderr io.Reader // nil when it has none
	wait   func() error
	// signal passes a signal on; terminate asks it to stop; kill stops
	// it.
	signal    func(os.Signal)
	terminate func()
	kill      func()
}

// startUpstream starts cfg's upstream: its command, or its connection.
func startUpstream(ctx context.Context, cfg Config, log *zap.Logger) (*upstream, error) {
	if cfg.UpstreamConn != nil {
		return connectUpstream(ctx, cfg.UpstreamConn, log)
	}
	cmd := exec.CommandContext(ctx, cfg.Upstream[0], cfg.Upstream[1:]...)
	setProcAttr(cmd)
	if cfg.PrepareUpstream != nil {
		if err := cfg.PrepareUpstream(cmd); err != nil {
			return nil, err
		}
	}
	upIn, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	upOut, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	upErr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start the upstream MCP server %q: %w", cfg.Upstream[0], err)
	}
	log.Info("upstream started", zap.Strings("command", cfg.Upstream), zap.Int("pid", cmd.Process.Pid))
	return &upstream{
		in: upIn, out: upOut, stderr: upErr, wait: cmd.Wait,
		signal:    func(sig os.Signal) { _ = cmd.Process.Signal(sig) },
		terminate: func() { _ = terminate(cmd.Process) },
		kill:      func() { _ = cmd.Process.Kill() },
	}, nil
}

// connectUpstream connects a non-process upstream. A signal, like
// termination, ends the connection: there is no process to pass it to.
func connectUpstream(ctx context.Context, conn UpstreamConn, log *zap.Logger) (*upstream, error) {
	cctx, cancel := context.WithCancel(ctx)
	r, w, wait, err := conn(cctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("cannot connect to the upstream MCP server: %w", err)
	}
	log.Info("upstream started", zap.String("connection", "in process"))
	return &upstream{
		in: w, out: r,
		wait: func() error {
			err := wait()
			cancel()
			return err
		},
		signal:    func(os.Signal) { cancel() },
		terminate: cancel,
		kill: func() {
			cancel()
			r.Close() // an upstream still writing is not read any more
		},
	}, nil
}
