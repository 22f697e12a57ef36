// Command servebench measures what `delegateos serve` adds to an MCP
// tools/call over Streamable HTTP, next to what a plain reverse proxy
// (net/http/httputil) adds, against the same upstream logic and in the same
// run, at 1, 16 and 128 concurrent sessions.
//
// Three setups, each driven by this program over HTTP/1.1 keep-alive
// connections with raw JSON-RPC bodies (no MCP client library in the
// measured path), one goroutine per MCP session making calls one after
// another:
//
//	direct    the built-in HTTP MCP server (servebench http ADDR), which
//	          answers every request with an application/json body at once
//	revproxy  an httputil.ReverseProxy in its own process (servebench
//	          revproxy ADDR TARGET) in front of the same HTTP server
//	serve     delegateos serve --token @FILE --root ID (no policy file: echo
//	          maps to mcp:echo:* at cost 0) in front of the same logic as a
//	          stdio server (servebench stdio), one process per session, its
//	          answers SSE streams as by default
//	serve-json  the same with --json-responses
//	serve-url   delegateos serve --upstream-url in front of direct's HTTP
//	          server (each session's relay reaches it through a bridge
//	          process): the same upstream hop as revproxy
//
// The upstream answers at once, so the numbers are the hops' own cost. The
// setups take turns in blocks of calls over several rounds, so that
// whatever else the machine is doing weighs on all alike. Added latency is a setup's p50 (p99) minus
// direct's. delegateos serve reaches its upstream over a pipe, not HTTP:
// its added latency is its front, its relay and the gate, less the HTTP
// handling the upstream itself would do.
package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// targetRatio: delegateos serve's added p50 at most 1.2 times the reverse
// proxy's.
const targetRatio = 1.2

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "stdio":
			if err := stdioServer(os.Stdin, os.Stdout); err != nil {
				fmt.Fprintln(os.Stderr, "servebench stdio:", err)
				os.Exit(1)
			}
			return
		case "http":
			fmt.Fprintln(os.Stderr, http.ListenAndServe(os.Args[2], http.HandlerFunc(httpServer)))
			os.Exit(1)
		case "revproxy":
			target, err := url.Parse(os.Args[3])
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			rp := httputil.NewSingleHostReverseProxy(target)
			rp.Transport = &http.Transport{MaxIdleConnsPerHost: 1024, MaxIdleConns: 1024}
			fmt.Fprintln(os.Stderr, http.ListenAndServe(os.Args[2], rp))
			os.Exit(1)
		}
	}
	os.Exit(bench(os.Args[1:]))
}

type options struct {
	delegateos string
	calls      int
	rounds     int
	levels     string
	check      bool
	keep       bool
}

func bench(args []string) int {
	var o options
	fs := flag.NewFlagSet("servebench", flag.ContinueOnError)
	fs.StringVar(&o.delegateos, "delegateos", "bin/delegateos", "the delegateos binary to measure")
	fs.IntVar(&o.calls, "calls", 2000, "calls per setup, level and round, spread over the sessions")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds")
	fs.StringVar(&o.levels, "sessions", "1,16,128", "the numbers of concurrent sessions, comma-separated")
	fs.BoolVar(&o.check, "check", false, "exit 1 if the target is missed at any level")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (keys, token, logs)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var levels []int
	for _, f := range strings.Split(o.levels, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 1 {
			fmt.Fprintln(os.Stderr, "servebench: -sessions: give positive numbers, e.g. 1,16,128")
			return 2
		}
		levels = append(levels, n)
	}
	if err := run(o, levels); err != nil {
		fmt.Fprintln(os.Stderr, "servebench:", err)
		return 1
	}
	return 0
}

// setup is one way of reaching the upstream.
type setup struct {
	name string
	url  string
}

func run(o options, levels []int) (err error) {
	dir, err := os.MkdirTemp("", "servebench-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(os.Stderr, "keeping", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dos, err := filepath.Abs(o.delegateos)
	if err != nil {
		return err
	}
	tokFile, root, err := mintToken(dos, dir)
	if err != nil {
		return err
	}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(os.Interrupt)
		}
		for _, p := range procs {
			_ = p.Wait()
		}
	}()
	start := func(name string, argv ...string) (string, error) {
		addr, err := freeAddr()
		if err != nil {
			return "", err
		}
		for i, a := range argv {
			argv[i] = strings.ReplaceAll(a, "ADDR", addr)
		}
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			return "", err
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			return "", err
		}
		procs = append(procs, cmd)
		return addr, waitListening(addr)
	}
	direct, err := start("direct", self, "http", "ADDR")
	if err != nil {
		return err
	}
	rev, err := start("revproxy", self, "revproxy", "ADDR", "http://"+direct)
	if err != nil {
		return err
	}
	serveArgs := []string{dos, "serve", "--listen", "ADDR", "--token", "@" + tokFile, "--root", root, "--max-sessions", "1024", "--max-calls", "4096"}
	sv, err := start("serve", append(slices.Clone(serveArgs), "--log", filepath.Join(dir, "serve-delegateos.log"), "--", self, "stdio")...)
	if err != nil {
		return err
	}
	svj, err := start("serve-json", append(slices.Clone(serveArgs), "--json-responses", "--log", filepath.Join(dir, "serve-json-delegateos.log"), "--", self, "stdio")...)
	if err != nil {
		return err
	}
	svu, err := start("serve-url", append(slices.Clone(serveArgs), "--log", filepath.Join(dir, "serve-url-delegateos.log"), "--upstream-url", "http://"+direct+"/mcp")...)
	if err != nil {
		return err
	}
	setups := []setup{
		{"direct", "http://" + direct + "/mcp"},
		{"revproxy", "http://" + rev + "/mcp"},
		{"serve", "http://" + sv + "/mcp"},
		{"serve-json", "http://" + svj + "/mcp"},
		{"serve-url", "http://" + svu + "/mcp"},
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxIdleConns: 4096, IdleConnTimeout: time.Minute}}

	fmt.Printf("servebench: %d calls per setup, level and round, %d rounds; GOMAXPROCS %d\n\n", o.calls, o.rounds, maxProcs())
	type result struct {
		lat  []time.Duration
		wall time.Duration
		n    int
	}
	missed := false
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "sessions\tsetup\tp50\tp99\tcalls/s\tadded p50\tadded p99\t")
	var ratios []string
	for _, n := range levels {
		// Each setup gets its sessions once per level; they are reused
		// over the rounds.
		sessions := make([][]*mcpSession, len(setups))
		for i, s := range setups {
			for range n {
				ms, err := openSession(client, s.url)
				if err != nil {
					return fmt.Errorf("%s: %v", s.name, err)
				}
				sessions[i] = append(sessions[i], ms)
			}
			// Warm up: a few calls per session.
			if _, _, err := drive(sessions[i], 2*n); err != nil {
				return fmt.Errorf("%s: %v", s.name, err)
			}
		}
		res := make([]result, len(setups))
		// The setups take turns in blocks, so that a change in the
		// machine's load weighs on all of them alike.
		blocks := max(1, min(10, o.calls/(20*n)))
		for range o.rounds {
			for range blocks {
				for i := range setups {
					lat, wall, err := drive(sessions[i], o.calls/blocks)
					if err != nil {
						return fmt.Errorf("%s: %v", setups[i].name, err)
					}
					res[i].lat = append(res[i].lat, lat...)
					res[i].wall += wall
					res[i].n += len(lat)
				}
			}
		}
		for i := range setups {
			for _, ms := range sessions[i] {
				ms.close()
			}
		}
		pct := func(i int, p float64) time.Duration {
			l := slices.Clone(res[i].lat)
			slices.Sort(l)
			return l[min(len(l)-1, int(float64(len(l))*p))]
		}
		d50, d99 := pct(0, 0.5), pct(0, 0.99)
		var added50 = map[string]time.Duration{}
		for i, s := range setups {
			p50, p99 := pct(i, 0.5), pct(i, 0.99)
			rate := float64(res[i].n) / res[i].wall.Seconds()
			a50, a99 := "", ""
			if i > 0 {
				a50, a99 = us(p50-d50), us(p99-d99)
				added50[s.name] = p50 - d50
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.0f\t%s\t%s\t\n", n, s.name, us(p50), us(p99), rate, a50, a99)
		}
		for _, name := range []string{"serve", "serve-json", "serve-url"} {
			r := float64(added50[name]) / float64(max(added50["revproxy"], time.Microsecond))
			ratios = append(ratios, fmt.Sprintf("%d sessions: %s added p50 %s = %.2f x the reverse proxy's %s (target <= %.1f)", n, name, us(added50[name]), r, us(added50["revproxy"]), targetRatio))
			if name == "serve" && r > targetRatio {
				missed = true
			}
		}
	}
	tw.Flush()
	fmt.Println()
	for _, r := range ratios {
		fmt.Println(r)
	}
	if missed && o.check {
		return errors.New("the target is missed")
	}
	return nil
}

func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond)) }

// drive makes calls across the sessions, one goroutine per session, and
// returns every call's latency and the wall time.
func drive(sessions []*mcpSession, calls int) ([]time.Duration, time.Duration, error) {
	per := max(1, calls/len(sessions))
	var mu sync.Mutex
	var all []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for _, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, per)
			for range per {
				t0 := time.Now()
				if err := s.call(); err != nil {
					mu.Lock()
					firstErr = cmp(firstErr, err)
					mu.Unlock()
					return
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all, time.Since(start), firstErr
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// mcpSession is one MCP session over Streamable HTTP.
type mcpSession struct {
	client *http.Client
	url    string
	id     string
	next   int
}

func openSession(client *http.Client, u string) (*mcpSession, error) {
	s := &mcpSession{client: client, url: u}
	res, err := s.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"servebench","version":"1"}}}`)
	if err != nil {
		return nil, err
	}
	s.id = res.Header.Get("Mcp-Session-Id")
	if _, err := readAnswer(res, "0"); err != nil {
		return nil, err
	}
	res, err = s.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return s, nil
}

func (s *mcpSession) post(body string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, s.url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
	return s.client.Do(req)
}

var callBody = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`

func (s *mcpSession) call() error {
	s.next++
	res, err := s.post(fmt.Sprintf(callBody, s.next))
	if err != nil {
		return err
	}
	ans, err := readAnswer(res, fmt.Sprint(s.next))
	if err != nil {
		return err
	}
	if !bytes.Contains(ans, []byte(`"result"`)) {
		return fmt.Errorf("call answered %s", ans)
	}
	return nil
}

func (s *mcpSession) close() {
	req, _ := http.NewRequest(http.MethodDelete, s.url, nil)
	req.Header.Set("Mcp-Session-Id", s.id)
	if res, err := s.client.Do(req); err == nil {
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
}

// readAnswer reads the response to request id from a JSON body or an SSE
// stream, and closes the body.
func readAnswer(res *http.Response, id string) ([]byte, error) {
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		return nil, fmt.Errorf("HTTP %d: %s", res.StatusCode, b)
	}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		return io.ReadAll(res.Body)
	}
	br := bufio.NewReader(res.Body)
	want := []byte(`"id":` + id + `,`)
	for {
		line, err := br.ReadBytes('\n')
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok && bytes.Contains(data, want) {
			io.Copy(io.Discard, br)
			return data, nil
		}
		if err != nil {
			return nil, fmt.Errorf("the stream ended without the answer to %s", id)
		}
	}
}

// httpServer is the built-in HTTP MCP server: sessions by header, every
// answer an application/json body.
func httpServer(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	result, id, ok := answer(body)
	if !ok {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if strings.Contains(string(body), `"initialize"`) {
		var b [16]byte
		rand.Read(b[:])
		w.Header().Set("Mcp-Session-Id", hex.EncodeToString(b[:]))
	}
	out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

// answer is the result for one request (ok false for anything else).
func answer(line []byte) (result any, id json.RawMessage, ok bool) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion string `json:"protocolVersion"`
			Arguments       struct {
				Text string `json:"text"`
			} `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &msg) != nil || msg.ID == nil || msg.Method == "" {
		return nil, nil, false
	}
	switch msg.Method {
	case "initialize":
		v := msg.Params.ProtocolVersion
		if v == "" {
			v = "2025-06-18"
		}
		result = map[string]any{"protocolVersion": v, "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]any{"name": "servebench", "version": "1"}}
	case "tools/list":
		result = map[string]any{"tools": []any{map[string]any{"name": "echo", "inputSchema": map[string]any{"type": "object"}}}}
	case "tools/call":
		result = map[string]any{"content": []any{map[string]any{"type": "text", "text": msg.Params.Arguments.Text}}}
	default:
		result = map[string]any{}
	}
	return result, msg.ID, true
}

// stdioServer is the same server over stdio.
func stdioServer(in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 64<<10)
	w := bufio.NewWriterSize(out, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, io.EOF) {
			return w.Flush()
		}
		if err != nil {
			return err
		}
		result, id, ok := answer(line)
		if !ok {
			continue
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
		w.Write(b)
		w.WriteByte('\n')
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}

func mintToken(dos, dir string) (tokFile, root string, err error) {
	run := func(args ...string) (string, error) {
		out, err := exec.Command(dos, args...).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return "", fmt.Errorf("delegateos %s: %v: %s", args[0], err, ee.Stderr)
			}
			return "", err
		}
		return strings.TrimSpace(string(out)), nil
	}
	rk, ak := filepath.Join(dir, "root.key"), filepath.Join(dir, "agent.key")
	if _, err := run("keygen", "--out", rk, "--name", "bench-root"); err != nil {
		return "", "", err
	}
	if _, err := run("keygen", "--out", ak, "--name", "bench-agent"); err != nil {
		return "", "", err
	}
	if root, err = run("id", "--key", rk); err != nil {
		return "", "", err
	}
	agent, err := run("id", "--key", ak)
	if err != nil {
		return "", "", err
	}
	tok, err := run("dct", "mint", "--key", rk, "--to", agent, "--cap", "mcp:echo:*", "--contract", "ct_bench", "--budget", "1000000000", "--ttl", "2h", "--max-depth", "0")
	if err != nil {
		return "", "", err
	}
	tokFile = filepath.Join(dir, "session.tok")
	return tokFile, root, os.WriteFile(tokFile, []byte(tok+"\n"), 0o600)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func waitListening(addr string) error {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on %s after 15s", addr)
}

func maxProcs() int { return runtime.GOMAXPROCS(0) }
