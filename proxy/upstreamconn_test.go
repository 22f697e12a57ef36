package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// connUpstream is an upstream reached through Config.UpstreamConn: it
// answers every request but those whose params say "hold".
type connUpstream struct {
	crash     chan error // a value ends the upstream with it, as a crash
	ignoreEOF bool       // it keeps running when its input closes, until ctx ends
	connected chan struct{}
	calls     chan string // every method it was sent
}

func newConnUpstream() *connUpstream {
	return &connUpstream{crash: make(chan error, 1), connected: make(chan struct{}), calls: make(chan string, 64)}
}

func (u *connUpstream) conn(ctx context.Context) (io.ReadCloser, io.WriteCloser, func() error, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	close(u.connected)
	go func() {
		err := u.serve(ctx, inR, outW)
		inR.CloseWithError(errors.New("ended"))
		outW.Close()
		done <- err
	}()
	return outR, inW, func() error { return <-done }, nil
}

func (u *connUpstream) serve(ctx context.Context, in io.Reader, out io.Writer) error {
	lines := make(chan []byte)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	for {
		select {
		case err := <-u.crash:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case line, ok := <-lines:
			if !ok {
				if u.ignoreEOF {
					<-ctx.Done()
					return ctx.Err()
				}
				return nil
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Name string `json:"name"`
					Hold bool   `json:"hold"`
				} `json:"params"`
			}
			if json.Unmarshal(line, &m) != nil {
				continue
			}
			u.calls <- m.Method + " " + m.Params.Name
			if m.ID == nil || m.Params.Hold {
				continue
			}
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}`+"\n", m.ID)
		}
	}
}

// connRun runs the relay with u as its upstream; the client's frames go
// to the returned writer, its answers come on the channel.
func connRun(t *testing.T, u *connUpstream, grace time.Duration) (io.WriteCloser, <-chan string, <-chan error, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := testSession(t, nil, io.Discard, io.Discard).cfg
	cfg.UpstreamConn, cfg.Log, cfg.ShutdownGrace = u.conn, zap.New(core), grace
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	answers := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			answers <- sc.Text()
		}
		close(answers)
	}()
	ran := make(chan error, 1)
	go func() {
		err := Run(context.Background(), cfg, inR, outW)
		outW.Close()
		ran <- err
	}()
	t.Cleanup(func() { inW.Close() })
	return inW, answers, ran, logs
}

func call(id int, tool string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`+"\n", id, tool)
}

func next[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s after 10s", what)
		panic("unreachable")
	}
}

// An upstream connection is relayed and gated like a process: an allowed
// call is answered under the client's id, a refused one never reaches it,
// and the client's EOF closes its input, which ends it and the relay.
func TestUpstreamConnRelaysAndEnds(t *testing.T) {
	u := newConnUpstream()
	in, answers, ran, logs := connRun(t, u, 0)
	io.WriteString(in, call(7, "echo"))
	if a := next(t, answers, "answer"); !strings.Contains(a, `"id":7`) || !strings.Contains(a, `"result"`) {
		t.Fatalf("echo answered %s", a)
	}
	io.WriteString(in, call(8, "drop_tables"))
	if a := next(t, answers, "answer"); !strings.Contains(a, `"id":8`) || !strings.Contains(a, "DCT verification failed") {
		t.Fatalf("drop_tables answered %s", a)
	}
	in.Close()
	if err := next(t, ran, "end of Run"); err != nil {
		t.Fatalf("Run after the client's EOF: %v", err)
	}
	close(u.calls)
	var got []string
	for c := range u.calls {
		got = append(got, c)
	}
	if strings.Join(got, ",") != "tools/call echo" {
		t.Fatalf("the upstream was sent %q", got)
	}
	if logs.FilterMessage("upstream started").Len() != 1 || logs.FilterMessage("upstream exited after the client closed").Len() != 1 {
		t.Fatalf("lifecycle lines: %v", logs.All())
	}
}

// An upstream connection that ends while a call is in flight is an
// upstream exit: the call is answered with an error and charged as
// unanswered, and Run returns *UpstreamExitError with the cause.
func TestUpstreamConnCrash(t *testing.T) {
	u := newConnUpstream()
	in, answers, ran, logs := connRun(t, u, 0)
	io.WriteString(in, call(1, "echo"))
	next(t, answers, "answer")
	waitSent(t, u.calls, "tools/call echo") // the first call's
	io.WriteString(in, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","hold":true}}`+"\n")
	waitSent(t, u.calls, "tools/call echo") // the second's: in flight
	cause := errors.New("connection reset")
	u.crash <- cause
	a := next(t, answers, "error for the call in flight")
	if !strings.Contains(a, `"id":2`) || !strings.Contains(a, "exited before answering") {
		t.Fatalf("the call in flight was answered %s", a)
	}
	err := next(t, ran, "end of Run")
	var exit *UpstreamExitError
	if !errors.As(err, &exit) || !errors.Is(err, cause) {
		t.Fatalf("Run returned %v, want an UpstreamExitError with the cause", err)
	}
	if logs.FilterMessage("upstream exited").Len() != 1 {
		t.Fatalf("no upstream exited line: %v", logs.All())
	}
	var outcomes []string
	for _, e := range logs.FilterMessage("decision").All() {
		outcomes = append(outcomes, fmt.Sprint(e.ContextMap()["outcome"]))
	}
	if strings.Join(outcomes, ",") != "result,unanswered" {
		t.Fatalf("the calls were settled as %v, want result,unanswered", outcomes)
	}
}

// waitSent waits for the upstream to be sent want.
func waitSent(t *testing.T, calls <-chan string, want string) {
	t.Helper()
	for {
		if c := next(t, calls, want); c == want {
			return
		}
	}
}

// An upstream connection that keeps running after its input closes is
// ended through its context once the shutdown grace is over.
func TestUpstreamConnTerminated(t *testing.T) {
	u := newConnUpstream()
	u.ignoreEOF = true
	in, answers, ran, logs := connRun(t, u, 50*time.Millisecond)
	io.WriteString(in, call(1, "echo"))
	next(t, answers, "answer")
	in.Close()
	if err := next(t, ran, "end of Run"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if logs.FilterMessage("upstream did not exit after its input closed; terminating it").Len() != 1 {
		t.Fatalf("not terminated: %v", logs.All())
	}
}
