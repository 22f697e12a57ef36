// Command ldpbench measures what an LDP task adds over calling the same
// tool directly. Three kinds of call of the docserver's echo take turns in
// blocks over several rounds, so that whatever else the machine does
// weighs on all alike:
//
//	(a) upstream: tools/call sent straight to a docserver of its own over
//	    stdio (one initialized MCP session), no delegateos at all;
//	(b) serve MCP: tools/call sent to delegateos serve's MCP endpoint
//	    (MCP's stateless style, the token as bearer), which relays it to the
//	    docserver it runs, through the gate;
//	(c) serve LDP: a TASK_SUBMIT→TASK_RESULT of the skill that calls echo,
//	    in a session already open, signed with Ed25519 and checked
//	    (ldp.Client), through the same serve and gate.
//
// It prints each kind's p50 and p99, and the ratios c/a and c/b of the
// medians and of the p99s, per round and over the whole run.
//
//	ldpbench -delegateos bin/delegateos -docserver bin/docserver [-n 1000] [-rounds 5]
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/ldp"
)

func main() {
	bin := flag.String("delegateos", "bin/delegateos", "the delegateos binary")
	docserver := flag.String("docserver", "bin/docserver", "the docserver binary (its echo tool is the upstream)")
	n := flag.Int("n", 1000, "calls of each kind, over all rounds")
	rounds := flag.Int("rounds", 5, "rounds the calls are split into (each reported, kinds taking turns in blocks within it)")
	flag.Parse()
	if err := run(*bin, *docserver, *n, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "ldpbench:", err)
		os.Exit(1)
	}
}

func run(bin, docserver string, n, rounds int) error {
	dir, err := os.MkdirTemp("", "ldpbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	root, _ := identity.Generate(rand.Reader, "root")
	agent, _ := identity.Generate(rand.Reader, "agent")
	server, _ := identity.Generate(rand.Reader, "server")
	keyFile := filepath.Join(dir, "server.key")
	if err := identity.SaveKeyFile(keyFile, server); err != nil {
		return err
	}
	tok, err := dct.Create(dct.CreateParams{Issuer: root, Delegatee: agent.ID(),
		Capabilities: []dct.Capability{{Namespace: "mcp", Action: "echo", Resource: "*"}},
		ContractID:   "ct_000000000000", DelegationID: "del_000000000001", MaxChainDepth: 1,
		MaxBudgetMicrocents: 1 << 40, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		return err
	}
	pol := fmt.Sprintf(`roots: [%q]
tools:
  - {match: echo, namespace: mcp, action: echo, resource: "*", cost: 0}
ldp:
  delegate_id: ldp:delegate:bench
  name: bench
  model_family: none
  model_version: "1"
  context_window: 1000
  trust_domain: {name: bench}
  skills:
    - {name: echo, tool: echo, input_argument: text}
`, root.ID())
	polFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(polFile, []byte(pol), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--policy", polFile, "--key", keyFile, "--json",
		"--", docserver, "--root", dir, "--diagnostics")
	cmd.Env = append(os.Environ(), "DELEGATEOS_STATE_DIR="+filepath.Join(dir, "state"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	var addr struct{ Address string }
	if err := json.NewDecoder(bufio.NewReader(out)).Decode(&addr); err != nil {
		return fmt.Errorf("serve did not say where it listens: %v", err)
	}
	base := "http://" + addr.Address
	ctx := context.Background()
	hc := &http.Client{}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	direct := func() error {
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Authorization", "Bearer "+tok.String())
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `"hi"`) {
			return fmt.Errorf("direct call: %s", b)
		}
		return nil
	}
	c := &ldp.Client{ID: "ldp:delegate:bench-router", TrustDomain: "bench", Key: agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	card, err := c.Discover(ctx, base)
	if err != nil {
		return err
	}
	member := &ldp.DelegateOSMember{DCT: tok.String(), Format: dct.Format}
	s, err := c.Open(ctx, base, card.DelegateID, ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}}, member, "", card.Metadata[ldp.MetaDID])
	if err != nil {
		return err
	}
	task := 0
	viaLDP := func() error {
		task++
		r, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: fmt.Sprintf("t%d", task), Skill: "echo", Input: json.RawMessage(`"hi"`)}, "", member, nil)
		if err != nil {
			return err
		}
		if _, ok := r.Body.(*ldp.TaskResult); !ok {
			return fmt.Errorf("TASK_SUBMIT: %s", r.Body.Type())
		}
		return nil
	}
	up, err := startUpstream(docserver, dir)
	if err != nil {
		return err
	}
	defer up.close()

	q := func(ds []time.Duration, p float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[int(p*float64(len(s)-1))]
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }
	kinds := []struct {
		name string
		f    func() error
		all  []time.Duration
	}{{"(a) upstream", up.call, nil}, {"(b) serve MCP", direct, nil}, {"(c) serve LDP", viaLDP, nil}}
	// One call of each first, outside the figures (connections, caches).
	for _, k := range kinds {
		if err := k.f(); err != nil {
			return fmt.Errorf("%s: %v", k.name, err)
		}
	}
	per := max(n/rounds, 1)
	fmt.Printf("%d calls of each kind per round, in blocks of %d taking turns; load average %s\n", per, max(per/10, 1), loadavg())
	fmt.Printf("round  %-12s %-12s %-12s  c/a p50  c/b p50\n", "(a) p50", "(b) p50", "(c) p50")
	for r := range rounds {
		round := make([][]time.Duration, len(kinds))
		// Blocks of a tenth of the round, taking turns, so that a burst of
		// other work on the machine falls on every kind.
		block := max(per/10, 1)
		for done := 0; done < per; done += block {
			for i := range kinds {
				for range min(block, per-done) {
					t0 := time.Now()
					if err := kinds[i].f(); err != nil {
						return fmt.Errorf("%s: %v", kinds[i].name, err)
					}
					round[i] = append(round[i], time.Since(t0))
				}
			}
		}
		for i := range kinds {
			kinds[i].all = append(kinds[i].all, round[i]...)
		}
		pa, pb, pc := q(round[0], 0.5), q(round[1], 0.5), q(round[2], 0.5)
		fmt.Printf("%-5d  %-12s %-12s %-12s  %-7.2f  %.2f\n", r+1, ms(pa), ms(pb), ms(pc), float64(pc)/float64(pa), float64(pc)/float64(pb))
	}
	fmt.Printf("\nall rounds     calls  p50          p99\n")
	for _, k := range kinds {
		fmt.Printf("%-13s  %5d  %-12s %s\n", k.name, len(k.all), ms(q(k.all, 0.5)), ms(q(k.all, 0.99)))
	}
	ka, kb, kc := kinds[0].all, kinds[1].all, kinds[2].all
	fmt.Printf("c/a: p50 %.2f, p99 %.2f (added at p50 %s)\n", float64(q(kc, 0.5))/float64(q(ka, 0.5)), float64(q(kc, 0.99))/float64(q(ka, 0.99)), ms(q(kc, 0.5)-q(ka, 0.5)))
	fmt.Printf("c/b: p50 %.2f, p99 %.2f (added at p50 %s)\n", float64(q(kc, 0.5))/float64(q(kb, 0.5)), float64(q(kc, 0.99))/float64(q(kb, 0.99)), ms(q(kc, 0.5)-q(kb, 0.5)))
	fmt.Printf("load average after: %s\n", loadavg())
	return s.Close(ctx, "done")
}

// loadavg is /proc/loadavg's first three figures, or "unknown".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// upstream is a docserver of the benchmark's own, spoken to over stdio as
// an MCP client would: newline-delimited JSON-RPC, one request at a time.
type upstream struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	id  int
}

func startUpstream(docserver, dir string) (*upstream, error) {
	cmd := exec.Command(docserver, "--root", dir, "--diagnostics")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	u := &upstream{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<16)}
	if _, err := u.request("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"ldpbench","version":"1"}}`); err != nil {
		u.close()
		return nil, fmt.Errorf("docserver initialize: %v", err)
	}
	if _, err := io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		u.close()
		return nil, err
	}
	return u, nil
}

// request sends one request and reads lines until the response with its ID.
func (u *upstream) request(method, params string) ([]byte, error) {
	u.id++
	if _, err := fmt.Fprintf(u.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", u.id, method, params); err != nil {
		return nil, err
	}
	want := fmt.Sprintf(`"id":%d,`, u.id)
	for {
		line, err := u.out.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		if bytes.Contains(line, []byte(want)) || bytes.Contains(line, []byte(fmt.Sprintf(`"id":%d}`, u.id))) {
			if bytes.Contains(line, []byte(`"error"`)) {
				return nil, fmt.Errorf("%s", bytes.TrimSpace(line))
			}
			return line, nil
		}
	}
}

func (u *upstream) call() error {
	line, err := u.request("tools/call", `{"name":"echo","arguments":{"text":"hi"}}`)
	if err != nil {
		return err
	}
	if !bytes.Contains(line, []byte(`"hi"`)) {
		return fmt.Errorf("direct call: %s", line)
	}
	return nil
}

func (u *upstream) close() {
	u.in.Close()
	u.cmd.Process.Kill()
	u.cmd.Wait()
}
