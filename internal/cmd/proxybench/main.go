// Command proxybench measures what `delegateos proxy` adds to an MCP
// tools/call, next to what a plain byte-copying relay adds, against the same
// upstream and in the same run.
//
// Three setups, each driven over stdio pipes with raw JSON-RPC lines (no MCP
// client library in the measured path), after the initialize handshake:
//
//	direct  the upstream itself
//	relay   a relay that starts the upstream and copies bytes both ways
//	proxy   delegateos proxy --token @FILE --root ID -- upstream (no policy
//	        file: the tool maps to mcp:echo:* at cost 0; the session token is
//	        verified once and then served from the verifier's cache)
//
// For each: latency of sequential calls (p50, p99) and the throughput of
// pipelined calls (a fixed number in flight). The three run side by side
// and take turns in small blocks of calls, over several rounds, so that
// whatever else the machine is doing weighs on all three alike; latency
// percentiles are over every round's calls, throughput is the median round.
// Next to throughput it prints the CPU time one pipelined call costs the
// client, the hop and the upstream (Linux): the client, the hop and the
// upstream share the machine's cores, so throughput follows the sum, and
// CPU per call moves much less than throughput when other work loads the
// machine.
// The upstream is, by default, a minimal stdio MCP server built into this
// program that answers at once, so the numbers are the hops' own cost;
// anything that serves an echo tool taking {"text": ...} can replace it
// (e.g. -- docserver --root DIR --diagnostics). Each setup's standard error
// goes to a file in the temporary directory (-keep keeps it).
//
// Usage:
//
//	proxybench [flags]                     run the benchmark (make bench-proxy)
//	proxybench serve                       the built-in upstream
//	proxybench relay -- COMMAND [ARGS...]  the plain relay
//	proxybench proxy [flags] -- COMMAND... delegateos's proxy in this process,
//	                                       for CPU profiling (-cpuprofile)
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// The targets (issue 20): the proxy's added p50 latency at most 1.2 times
// the plain relay's, and its pipelined throughput at least 0.8 times the
// relay's.
const (
	targetLatencyRatio    = 1.2
	targetThroughputRatio = 0.8
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "serve":
			if err := serve(os.Stdin, os.Stdout); err != nil {
				fmt.Fprintln(os.Stderr, "proxybench serve:", err)
				os.Exit(1)
			}
			return
		case "relay":
			os.Exit(relay(os.Args[2:]))
		case "proxy":
			os.Exit(inProcessProxy(os.Args[2:]))
		}
	}
	os.Exit(bench(os.Args[1:]))
}

type options struct {
	delegateos string
	calls      int
	warmup     int
	pipelined  int
	inflight   int
	rounds     int
	block      int
	upstream   []string
	proxyLog   string
	proxyFlags string
	profile    string
	check      bool
	keep       bool
	audit      bool
}

func bench(args []string) int {
	var o options
	fs := flag.NewFlagSet("proxybench", flag.ContinueOnError)
	fs.StringVar(&o.delegateos, "delegateos", "bin/delegateos", "the delegateos binary to measure")
	fs.IntVar(&o.calls, "calls", 2000, "sequential tools/call requests per setup and round, for latency")
	fs.IntVar(&o.warmup, "warmup", 500, "sequential calls per setup before measuring")
	fs.IntVar(&o.pipelined, "pipelined", 20000, "pipelined tools/call requests per setup and round, for throughput")
	fs.IntVar(&o.inflight, "inflight", 64, "requests in flight during the pipelined phase")
	fs.IntVar(&o.rounds, "rounds", 5, "rounds")
	fs.IntVar(&o.block, "block", 20, "sequential calls made on one setup before moving to the next")
	fs.StringVar(&o.proxyLog, "proxy-log", "", "the proxy's log file (default: a file in the temporary directory, as a deployment would log)")
	fs.StringVar(&o.proxyFlags, "proxy-flags", "", "more flags for delegateos proxy, space-separated (e.g. \"--policy FILE\")")
	fs.StringVar(&o.profile, "cpuprofile", "", "replace the proxy binary by the same proxy run inside this program (proxybench proxy) and write its CPU profile to this file (with -audit, the proxy+audit setup's to this file with .audit appended)")
	fs.BoolVar(&o.check, "check", false, "exit 1 if a target is missed (with -audit, the audit log's too)")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (keys, token, logs)")
	fs.BoolVar(&o.audit, "audit", false, "add a fourth setup, proxy+audit: the proxy signing receipts into an audit log, compared with the proxy without")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: proxybench [flags] [-- UPSTREAM_COMMAND [ARGS...]]")
		fmt.Fprintln(fs.Output(), "The default upstream is this program's built-in server (proxybench serve), which answers at once.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	o.upstream = fs.Args()
	if o.calls < 1 || o.pipelined < 1 || o.inflight < 1 || o.rounds < 1 || o.block < 1 || o.warmup < 0 {
		fmt.Fprintln(os.Stderr, "proxybench: -calls, -pipelined, -inflight, -rounds and -block must be positive")
		return 2
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "proxybench:", err)
		return 1
	}
	return 0
}

// setup is one way of reaching the upstream.
type setup struct {
	name string
	argv []string
	// drain, when set, waits until the setup has finished the work of the
	// calls made so far that outlives their responses (an audit log's
	// receipts).
	drain func(calls int) error
}

// sample is one setup's measurement in one round.
type sample struct {
	p50, p99   time.Duration
	throughput float64 // calls per second
}

// cpuPerCall is the CPU time one pipelined call cost the setup's own
// process and, separately, the processes it started.
type cpuPerCall struct {
	self, children, client time.Duration
	ok                     bool
	// reads and writes are the hop's system calls per call (for the direct
	// setup, the upstream's); negative when not counted.
	reads, writes float64
	// switches is the hop's context switches per call; negative when not
	// counted.
	switches float64
}

func run(o options) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dos, err := filepath.Abs(o.delegateos)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dos); err != nil {
		return fmt.Errorf("the delegateos binary: %w (build it with make build, or give -delegateos)", err)
	}
	tmp, err := os.MkdirTemp("", "proxybench-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(os.Stderr, "proxybench: keeping", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	root, tokenFile, err := mintToken(dos, tmp)
	if err != nil {
		return err
	}
	upstream := o.upstream
	if len(upstream) == 0 {
		upstream = []string{self, "serve"}
	}
	logFile := o.proxyLog
	if logFile == "" {
		logFile = filepath.Join(tmp, "proxy.log")
	}
	proxyArgv := append([]string{dos, "proxy", "--token", "@" + tokenFile, "--root", root, "--log", logFile}, strings.Fields(o.proxyFlags)...)
	proxyArgv = append(proxyArgv, "--")
	if o.profile != "" {
		prof, err := filepath.Abs(o.profile)
		if err != nil {
			return err
		}
		if o.proxyFlags != "" {
			return errors.New("-proxy-flags and -cpuprofile do not go together: the in-process proxy takes no delegateos flags")
		}
		proxyArgv = []string{self, "proxy", "-token", tokenFile, "-root", root, "-log", logFile, "-cpuprofile", prof, "--"}
	}
	setups := []setup{
		{name: "direct", argv: upstream},
		{name: "relay", argv: append([]string{self, "relay", "--"}, upstream...)},
		{name: "proxy", argv: append(proxyArgv, upstream...)},
	}
	if o.audit {
		s, err := auditSetup(o, dos, tmp, root, tokenFile, upstream)
		if err != nil {
			return err
		}
		setups = append(setups, s)
	}

	fmt.Printf("proxybench: per setup and round, %d sequential calls (in blocks of %d, setups interleaved) and %d pipelined calls with %d in flight; %d rounds after %d warm-up calls\n",
		o.calls, o.block, o.pipelined, o.inflight, o.rounds, o.warmup)
	fmt.Printf("upstream: %s\nproxy:    %s\n", strings.Join(upstream, " "), strings.Join(setups[2].argv[:len(setups[2].argv)-len(upstream)], " "))
	fmt.Printf("machine:  %d CPUs, load average %s at the start\n\n", runtime.NumCPU(), loadavg())

	conns := make([]*conn, len(setups))
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.close()
			}
		}
	}()
	// failed explains an error of setup i with the end of its stderr.
	failed := func(i int, what string, err error) error {
		b, _ := os.ReadFile(filepath.Join(tmp, setups[i].name+".stderr"))
		if len(b) > 2000 {
			b = b[len(b)-2000:]
		}
		if len(b) > 0 {
			return fmt.Errorf("%s: %s: %w\n%s's standard error ends:\n%s", setups[i].name, what, err, setups[i].name, b)
		}
		return fmt.Errorf("%s: %s: %w", setups[i].name, what, err)
	}
	for i, s := range setups {
		c, err := start(s, filepath.Join(tmp, s.name+".stderr"))
		if err != nil {
			return failed(i, "start", err)
		}
		conns[i] = c
		if err := c.handshake(); err != nil {
			return failed(i, "handshake", err)
		}
		if _, err := c.sequential(o.warmup); err != nil {
			return failed(i, "warm-up", err)
		}
	}

	// lat[i] pools every round's sequential latencies of setup i; thr[i]
	// holds its pipelined throughput per round.
	lat := make([][]time.Duration, len(setups))
	thr := make([][]float64, len(setups))
	cpu := make([][]cpuPerCall, len(setups))
	for r := 0; r < o.rounds; r++ {
		roundLat := make([][]time.Duration, len(setups))
		for b, done := 0, 0; done < o.calls; b++ {
			n := min(o.block, o.calls-done)
			for k := range setups {
				i := (k + b + r) % len(setups)
				d, err := conns[i].sequential(n)
				if err != nil {
					return failed(i, fmt.Sprintf("round %d", r+1), err)
				}
				roundLat[i] = append(roundLat[i], d...)
			}
			done += n
		}
		for k := range setups {
			i := (k + r) % len(setups)
			t, c, err := conns[i].pipelined(o.pipelined, o.inflight)
			if err != nil {
				return failed(i, fmt.Sprintf("round %d, pipelined", r+1), err)
			}
			thr[i] = append(thr[i], t)
			cpu[i] = append(cpu[i], c)
		}
		fmt.Printf("round %d:", r+1)
		round := make([]sample, len(setups))
		for i, s := range setups {
			round[i] = summarize(roundLat[i], thr[i][r:r+1])
			fmt.Printf("  %s p50 %s p99 %s %s/s", s.name, us(round[i].p50), us(round[i].p99), thousands(round[i].throughput))
			lat[i] = append(lat[i], roundLat[i]...)
		}
		l, t := ratios(round[0], round[1], round[2])
		fmt.Printf("  | ratios %.2f %.2f\n", l, t)
	}
	for i, c := range conns {
		conns[i] = nil
		if err := c.close(); err != nil {
			return failed(i, "shutting down", err)
		}
	}

	med := make([]sample, len(setups))
	for i := range setups {
		med[i] = summarize(lat[i], thr[i])
	}
	fmt.Printf("\nall %d rounds (latency percentiles over %d calls per setup, throughput the median round):\n", o.rounds, o.rounds*o.calls)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "setup\tp50 µs\tp99 µs\tadded p50 µs\tpipelined calls/s\tvs direct\t")
	for i, s := range setups {
		added := "-"
		if i > 0 {
			added = us(med[i].p50 - med[0].p50)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f\t\n", s.name, us(med[i].p50), us(med[i].p99), added,
			thousands(med[i].throughput), med[i].throughput/med[0].throughput)
	}
	tw.Flush()
	printCPU(setups, cpu)
	fmt.Printf("(load average %s at the end; on a busy machine the latency ratio swings from run to run)\n", loadavg())
	printAudit(med, time.Microsecond)
	latRatio, thrRatio := ratios(med[0], med[1], med[2])
	latOK, thrOK := latRatio <= targetLatencyRatio, thrRatio >= targetThroughputRatio
	fmt.Printf("\nproxy added p50 ÷ relay added p50:    %.2f  (target ≤ %.1f: %s)\n", latRatio, targetLatencyRatio, verdict(latOK))
	fmt.Printf("proxy throughput ÷ relay throughput:  %.2f  (target ≥ %.1f: %s)\n", thrRatio, targetThroughputRatio, verdict(thrOK))
	auditOK := true
	if al, at, ok := auditRatios(med, time.Microsecond); ok {
		alOK, atOK := al <= targetAuditLatencyRatio, at >= targetAuditThroughputRatio
		auditOK = alOK && atOK
		fmt.Printf("audit on ÷ off added p50:             %.2f  (target ≤ %.1f: %s)\n", al, targetAuditLatencyRatio, verdict(alOK))
		fmt.Printf("audit on ÷ off throughput:            %.2f  (target ≥ %.1f: %s)\n", at, targetAuditThroughputRatio, verdict(atOK))
	}
	if o.profile != "" {
		fmt.Printf("\nCPU profile of the in-process proxy: %s (go tool pprof -top %s %s)\n", o.profile, self, o.profile)
		if o.audit {
			fmt.Printf("and of the in-process proxy with the audit log: %s.audit\n", o.profile)
		}
	}
	if o.check && !(latOK && thrOK && auditOK) {
		return errors.New("a target was missed")
	}
	return nil
}

// printCPU prints the median CPU time per pipelined call of each setup's
// process and of the upstream under it: with the cores shared, the hop's
// CPU per call is what bounds its throughput, and unlike throughput it
// hardly moves with the machine's load.
func printCPU(setups []setup, cpu [][]cpuPerCall) {
	med := func(c []cpuPerCall, f func(cpuPerCall) time.Duration) time.Duration {
		v := make([]time.Duration, 0, len(c))
		for _, x := range c {
			if !x.ok {
				return -1
			}
			v = append(v, f(x))
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	self := func(c cpuPerCall) time.Duration { return c.self }
	children := func(c cpuPerCall) time.Duration { return c.children }
	client := func(c cpuPerCall) time.Duration { return c.client }
	fmt.Print("CPU µs per pipelined call (median round):")
	for i, s := range setups {
		hop, up := med(cpu[i], self), med(cpu[i], children)
		if hop < 0 {
			fmt.Println(" not measured on this system")
			return
		}
		if i == 0 {
			// The direct setup's process is the upstream itself.
			hop, up = 0, hop
		}
		fmt.Printf("  %s: client %s, hop %s, upstream %s;", s.name, ns(med(cpu[i], client)), ns(hop), ns(up))
	}
	fmt.Println()
	medf := func(c []cpuPerCall, f func(cpuPerCall) float64) float64 {
		v := make([]float64, len(c))
		for i := range c {
			v[i] = f(c[i])
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	reads := func(c cpuPerCall) float64 { return c.reads }
	writes := func(c cpuPerCall) float64 { return c.writes }
	if medf(cpu[0], reads) < 0 {
		return
	}
	sw := func(c cpuPerCall) float64 { return c.switches }
	fmt.Print("per pipelined call (median round), reads/writes and context switches:")
	for i, s := range setups {
		who := "hop"
		if i == 0 {
			who = "upstream"
		}
		fmt.Printf("  %s: %s %.2f/%.2f, %.2f;", s.name, who, medf(cpu[i], reads), medf(cpu[i], writes), medf(cpu[i], sw))
	}
	fmt.Println()
}

func ns(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e3, 'f', 2, 64) }

// loadavg is the 1-minute load average, or "?" where there is none.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// ratios returns the proxy's added p50 latency over the relay's, and the
// proxy's throughput over the relay's.
func ratios(direct, relay, proxy sample) (latency, throughput float64) {
	relayAdded := float64(relay.p50 - direct.p50)
	if relayAdded <= 0 {
		// The relay's hop vanished in the noise; avoid dividing by it.
		relayAdded = float64(time.Microsecond)
	}
	return float64(proxy.p50-direct.p50) / relayAdded, proxy.throughput / relay.throughput
}

// summarize takes latency percentiles over lat and the median of thr.
func summarize(lat []time.Duration, thr []float64) sample {
	lat = slices.Clone(lat)
	slices.Sort(lat)
	thr = slices.Clone(thr)
	slices.Sort(thr)
	m := thr[len(thr)/2]
	if len(thr)%2 == 0 {
		m = (thr[len(thr)/2-1] + thr[len(thr)/2]) / 2
	}
	return sample{p50: lat[len(lat)*50/100], p99: lat[len(lat)*99/100], throughput: m}
}

func us(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e3, 'f', 1, 64) }

func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// mintToken creates a root and an agent key and a session token granting
// the agent mcp:echo:* with the delegateos command, so the benchmark uses the
// CLI exactly as an operator would.
func mintToken(dos, dir string) (root, tokenFile string, err error) {
	runDOS := func(args ...string) (string, error) {
		cmd := exec.Command(dos, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("delegateos %s: %v: %s", args[0], err, strings.TrimSpace(stderr.String()))
		}
		return strings.TrimSpace(string(out)), nil
	}
	rootKey, agentKey := filepath.Join(dir, "root.key"), filepath.Join(dir, "agent.key")
	if _, err := runDOS("keygen", "--out", rootKey, "--name", "bench-root"); err != nil {
		return "", "", err
	}
	if _, err := runDOS("keygen", "--out", agentKey, "--name", "bench-agent"); err != nil {
		return "", "", err
	}
	if root, err = runDOS("id", "--key", rootKey); err != nil {
		return "", "", err
	}
	agent, err := runDOS("id", "--key", agentKey)
	if err != nil {
		return "", "", err
	}
	tok, err := runDOS("dct", "mint", "--key", rootKey, "--to", agent, "--cap", "mcp:echo:*",
		"--contract", "ct_proxybench", "--budget", "1000000000", "--ttl", "2h", "--max-depth", "1")
	if err != nil {
		return "", "", err
	}
	tokenFile = filepath.Join(dir, "session.tok")
	return root, tokenFile, os.WriteFile(tokenFile, []byte(tok+"\n"), 0o600)
}

// conn is a running setup: its stdin and a reader over its stdout.
type conn struct {
	drain  func(calls int) error
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	nextID int
	buf    []byte
}

func start(s setup, stderr string) (*conn, error) {
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	errFile, err := os.Create(stderr)
	if err != nil {
		return nil, err
	}
	defer errFile.Close() // the child has its own copy
	cmd.Stderr = errFile
	// Pipes whose ends here block in read and write, so the harness's own
	// wake-ups do not go through the runtime's poller.
	childIn, in, err := blockingPipe()
	if err != nil {
		return nil, err
	}
	out, childOut, err := blockingPipe()
	if err != nil {
		childIn.Close()
		in.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout = childIn, childOut
	err = cmd.Start()
	childIn.Close()
	childOut.Close()
	if err != nil {
		in.Close()
		out.Close()
		return nil, err
	}
	return &conn{drain: s.drain, cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10), nextID: 1}, nil
}

// readResponse reads one frame and checks that it answers a request with a
// result (an error would make the numbers meaningless: a denied call never
// reaches the upstream).
func (c *conn) readResponse() ([]byte, error) {
	line, err := c.out.ReadSlice('\n')
	if err != nil {
		return nil, fmt.Errorf("reading a response: %w", err)
	}
	if !bytes.Contains(line, []byte(`"result"`)) {
		return nil, fmt.Errorf("not a result: %s", bytes.TrimSpace(line))
	}
	return line, nil
}

func (c *conn) close() error {
	c.in.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
		return errors.New("did not exit within 10s of its input closing")
	}
}

// callFrame appends a tools/call request with the given id.
func callFrame(b []byte, id int) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, int64(id), 10)
	return append(b, `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, proxy"}}}`+"\n"...)
}

// handshake initializes the session as an MCP client does.
func (c *conn) handshake() error {
	if _, err := io.WriteString(c.in, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"proxybench","version":"1"}}}`+"\n"); err != nil {
		return err
	}
	if _, err := c.readResponse(); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	_, err := io.WriteString(c.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	return err
}

// sequential makes n calls one at a time and returns each one's latency,
// from before writing the request to after reading the response.
func (c *conn) sequential(n int) ([]time.Duration, error) {
	lat := make([]time.Duration, n)
	for i := range lat {
		c.buf = callFrame(c.buf[:0], c.nextID)
		c.nextID++
		t0 := time.Now()
		if _, err := c.in.Write(c.buf); err != nil {
			return nil, err
		}
		if _, err := c.readResponse(); err != nil {
			return nil, err
		}
		lat[i] = time.Since(t0)
	}
	// Deferred work is waited for outside the timing, so that it does not
	// land in another setup's turn.
	if c.drain != nil {
		if err := c.drain(c.nextID - 1); err != nil {
			return nil, err
		}
	}
	return lat, nil
}

// pipelined makes n calls keeping inflight of them outstanding and returns
// the calls per second and the CPU time each call cost.
func (c *conn) pipelined(n, inflight int) (float64, cpuPerCall, error) {
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = callFrame(nil, c.nextID)
		c.nextID++
	}
	slots := make(chan struct{}, inflight)
	readErr := make(chan error, 1)
	go func() {
		for range n {
			if _, err := c.readResponse(); err != nil {
				readErr <- err
				return
			}
			<-slots
		}
		readErr <- nil
	}()
	self0, children0, ok0 := cpuTime(c.cmd.Process.Pid)
	client0, _, _ := cpuTime(os.Getpid())
	r0, w0, iok0 := syscalls(c.cmd.Process.Pid)
	cs0, csok0 := switches(c.cmd.Process.Pid)
	t0 := time.Now()
	for _, f := range frames {
		select {
		case slots <- struct{}{}:
		case err := <-readErr:
			return 0, cpuPerCall{}, err
		}
		if _, err := c.in.Write(f); err != nil {
			return 0, cpuPerCall{}, err
		}
	}
	if err := <-readErr; err != nil {
		return 0, cpuPerCall{}, err
	}
	// Deferred work counts: the calls are done when it is.
	if c.drain != nil {
		if err := c.drain(c.nextID - 1); err != nil {
			return 0, cpuPerCall{}, err
		}
	}
	elapsed := time.Since(t0)
	self1, children1, ok1 := cpuTime(c.cmd.Process.Pid)
	client1, _, _ := cpuTime(os.Getpid())
	r1, w1, iok1 := syscalls(c.cmd.Process.Pid)
	cs1, csok1 := switches(c.cmd.Process.Pid)
	per := func(d time.Duration) time.Duration { return d / time.Duration(n) }
	cpu := cpuPerCall{self: per(self1 - self0), children: per(children1 - children0), client: per(client1 - client0), ok: ok0 && ok1, reads: -1, writes: -1, switches: -1}
	if iok0 && iok1 {
		cpu.reads, cpu.writes = float64(r1-r0)/float64(n), float64(w1-w0)/float64(n)
	}
	if csok0 && csok1 {
		cpu.switches = float64(cs1-cs0) / float64(n)
	}
	return float64(n) / elapsed.Seconds(), cpu, nil
}
