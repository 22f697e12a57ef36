package mcptest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
)

// ServeOptions are how StartServe runs delegateos serve.
type ServeOptions struct {
	// Policy is written to a file and given as --policy.
	Policy *Policy
	// Token, if set, is written to a file and given as --token @FILE: the
	// token of sessions whose client sends none.
	Token *dct.Token
	// Flags are further flags of delegateos serve (before --).
	Flags []string
	// Upstream is the upstream's command line; empty means the docserver
	// with --diagnostics serving the Env's Docs.
	Upstream []string
	// UpstreamURL, if set, is given as --upstream-url instead of an
	// upstream command.
	UpstreamURL string
	// WantExit is the exit status wanted after SIGTERM; nil means 0.
	WantExit func(code int) bool
	// Env is added to the server's environment.
	Env []string
}

// Server is a running delegateos serve.
type Server struct {
	t testing.TB
	// Cmd is the running command.
	Cmd *exec.Cmd
	// URL is the MCP endpoint, Base the server's root (no trailing slash).
	URL, Base string
	// Addr is the address it listens on.
	Addr string
	// LogPath is its --log file.
	LogPath string
	// Stderr is what it wrote to its stderr.
	Stderr *Buffer

	proc *Process // for its log helpers
}

// StartServe starts delegateos serve on a free loopback port in front of
// o.Upstream and waits until it listens. When the test ends it is sent
// SIGTERM and must exit (within 20s) with the status wanted, without a
// race report, every upstream it started gone.
func (e *Env) StartServe(o ServeOptions) *Server {
	t := e.t
	t.Helper()
	n := proxies.Add(1)
	logPath := filepath.Join(e.Dir, fmt.Sprintf("serve-%d.log", n))
	args := []string{Delegateos(t), "serve", "--listen", "127.0.0.1:0", "--log", logPath}
	if o.Policy != nil {
		path := filepath.Join(e.Dir, fmt.Sprintf("policy-%d.yaml", n))
		WriteFile(t, path, o.Policy.YAML())
		args = append(args, "--policy", path)
	}
	if o.Token != nil {
		path := filepath.Join(e.Dir, fmt.Sprintf("session-%d.tok", n))
		WriteFile(t, path, o.Token.String()+"\n")
		args = append(args, "--token", "@"+path)
	}
	args = append(args, o.Flags...)
	if o.UpstreamURL != "" {
		args = append(args, "--upstream-url", o.UpstreamURL)
	} else if args = append(args, "--"); len(o.Upstream) > 0 {
		args = append(args, o.Upstream...)
	} else {
		args = append(args, Docserver(t), "--root", e.Docs, "--diagnostics")
	}
	s := &Server{t: t, LogPath: logPath, Stderr: &Buffer{}}
	s.Cmd = exec.Command(args[0], args[1:]...)
	s.Cmd.Stdout, s.Cmd.Stderr = s.Stderr, s.Stderr
	s.Cmd.Env = append(os.Environ(), "GORACE="+goraceValue(), "DELEGATEOS_STATE_DIR="+filepath.Join(e.Dir, "state"))
	s.Cmd.Env = append(s.Cmd.Env, o.Env...)
	if err := s.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = s.Cmd.Wait(); close(exited) }()
	s.proc = &Process{t: t, Cmd: s.Cmd, Stderr: s.Stderr, LogPath: logPath, exited: exited}
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = s.Cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			t.Errorf("delegateos serve did not exit within 20s of SIGTERM; killing it")
			_ = s.Cmd.Process.Kill()
			<-exited
		}
		s.checkExit(waitErr, o.WantExit)
	})
	Eventually(t, "the log file", func() bool { _, err := os.Stat(logPath); return err == nil })
	line := s.proc.WaitLog("serving", nil)
	s.Addr, _ = line["address"].(string)
	s.Base = "http://" + s.Addr
	s.URL, _ = line["url"].(string)
	return s
}

func (s *Server) checkExit(waitErr error, want func(int) bool) {
	t := s.t
	code := s.Cmd.ProcessState.ExitCode()
	if want == nil {
		want = func(c int) bool { return c == 0 }
	}
	if !want(code) {
		t.Errorf("delegateos serve exited with status %d (%v)", code, waitErr)
	}
	if strings.Contains(s.Stderr.String(), "WARNING: DATA RACE") {
		t.Errorf("delegateos serve reported a data race:\n%s", s.Stderr.String())
	}
	for _, l := range s.proc.LogWith("upstream started", nil) {
		pid, _ := l["pid"].(float64)
		if pid > 0 && syscall.Kill(int(pid), 0) == nil {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", int(pid))); err == nil && !strings.Contains(string(b), ") Z ") {
				t.Errorf("upstream %d is still running after delegateos serve exited", int(pid))
			}
		}
	}
	if t.Failed() {
		t.Logf("delegateos serve stderr:\n%s\nlog:\n%s", clipLog(s.Stderr.String()), clipLog(s.proc.Log()))
	}
}

// Signal sends sig to the server.
func (s *Server) Signal(sig os.Signal) { _ = s.Cmd.Process.Signal(sig) }

// WaitExit waits up to d for the server to exit.
func (s *Server) WaitExit(d time.Duration) bool { return s.proc.WaitExit(d) }

// LogWith returns the log lines with message msg that match (nil: all).
func (s *Server) LogWith(msg string, match func(map[string]any) bool) []map[string]any {
	return s.proc.LogWith(msg, match)
}

// WaitLog waits for a log line with message msg that matches.
func (s *Server) WaitLog(msg string, match func(map[string]any) bool) map[string]any {
	return s.proc.WaitLog(msg, match)
}

// Log is the server's whole log.
func (s *Server) Log() string { return s.proc.Log() }

// HTTPResponse is an answer of the server, its body read.
type HTTPResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a map (nil if it is not a JSON object).
func (r *HTTPResponse) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// Messages are the JSON-RPC messages of the body: the one JSON object of
// an application/json answer, or the data of every SSE event.
func (r *HTTPResponse) Messages() []map[string]any {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		if m := r.JSON(); m != nil {
			return []map[string]any{m}
		}
		return nil
	}
	var out []map[string]any
	for _, line := range strings.Split(string(r.Body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || strings.TrimSpace(data) == "" {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(data), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// Do sends one request to the server with the headers an MCP client sends
// (Content-Type and Accept for a POST) plus hdr, and reads the answer.
func (s *Server) Do(method, path string, hdr map[string]string, body string) *HTTPResponse {
	s.t.Helper()
	req, err := http.NewRequest(method, s.Base+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: CallTimeout}
	res, err := client.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return &HTTPResponse{Status: res.StatusCode, Header: res.Header, Body: b}
}

// Initialize starts a session with hdr (an Authorization header, say) and
// sends notifications/initialized; it returns the session id.
func (s *Server) Initialize(hdr map[string]string) string {
	s.t.Helper()
	res := s.Do(http.MethodPost, "/mcp", hdr, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"sampling":{},"elicitation":{},"roots":{}},"clientInfo":{"name":"mcptest","version":"1"}}}`)
	if res.Status != http.StatusOK {
		s.t.Fatalf("initialize: HTTP %d: %s", res.Status, res.Body)
	}
	id := res.Header.Get("Mcp-Session-Id")
	if id == "" {
		s.t.Fatalf("initialize: no Mcp-Session-Id in the answer")
	}
	h := map[string]string{"Mcp-Session-Id": id}
	for k, v := range hdr {
		h[k] = v
	}
	if r := s.Do(http.MethodPost, "/mcp", h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.Status != http.StatusAccepted {
		s.t.Fatalf("notifications/initialized: HTTP %d: %s", r.Status, r.Body)
	}
	return id
}

// Post sends one JSON-RPC message in session sid with hdr.
func (s *Server) Post(sid string, hdr map[string]string, body string) *HTTPResponse {
	s.t.Helper()
	h := map[string]string{"Mcp-Session-Id": sid}
	for k, v := range hdr {
		h[k] = v
	}
	return s.Do(http.MethodPost, "/mcp", h, body)
}

// Bearer is the Authorization header carrying tok.
func Bearer(tok *dct.Token) map[string]string {
	return map[string]string{"Authorization": "Bearer " + tok.String()}
}

// CallBody is a tools/call request body.
func CallBody(id, tool string, args map[string]any) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	return string(b)
}

// Stream is an SSE answer being read as it arrives.
type Stream struct {
	t      testing.TB
	Status int
	Header http.Header
	body   io.ReadCloser
	msgs   chan map[string]any
	// LastEventID is the id of the last event read.
	LastEventID string
}

// PostStream sends one JSON-RPC message in session sid with hdr, and
// returns its answer to be read event by event.
func (s *Server) PostStream(sid string, hdr map[string]string, body string) *Stream {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	st := &Stream{t: s.t, Status: res.StatusCode, Header: res.Header, body: res.Body, msgs: make(chan map[string]any, 64)}
	s.t.Cleanup(st.Close)
	go st.read()
	return st
}

func (st *Stream) read() {
	defer close(st.msgs)
	br := bufio.NewReader(st.body)
	id := ""
	for {
		line, err := br.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id = v
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok && strings.TrimSpace(data) != "" {
			var m map[string]any
			if json.Unmarshal([]byte(data), &m) == nil {
				m["_eventId"] = id
				st.msgs <- m
			}
		}
		if err != nil {
			return
		}
	}
}

// Next returns the next message, failing the test if none comes within
// CallTimeout; nil when the stream has ended.
func (st *Stream) Next() map[string]any {
	st.t.Helper()
	select {
	case m, ok := <-st.msgs:
		if !ok {
			return nil
		}
		st.LastEventID, _ = m["_eventId"].(string)
		return m
	case <-time.After(CallTimeout):
		st.t.Fatalf("no event within %s", CallTimeout)
		return nil
	}
}

// Close drops the connection.
func (st *Stream) Close() { st.body.Close() }

// JSON is v encoded, for matching in tests.
func JSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
