// Command ldpbench measures what an LDP task adds over calling the same
// tool directly: delegateos serve with an ldp section, in front of the
// docserver's echo, is sent N tools/call requests straight to its MCP
// endpoint (MCP's stateless style, the token as bearer) and N TASK_SUBMITs
// of the skill that calls echo, in one session, signed with Ed25519 and
// checked (ldp.Client). The two take turns in blocks over several rounds,
// so that whatever else the machine does weighs on both alike. It prints
// each one's p50 and p99, the latency the LDP task adds at the median and
// the ratio of the medians.
//
//	ldpbench -delegateos bin/delegateos -docserver bin/docserver [-n 300] [-rounds 5]
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
	n := flag.Int("n", 300, "calls of each kind")
	rounds := flag.Int("rounds", 5, "blocks each kind's calls are split into, taking turns")
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
	var d, l []time.Duration
	for range rounds {
		for _, k := range []struct {
			f   func() error
			out *[]time.Duration
		}{{direct, &d}, {viaLDP, &l}} {
			for range n / rounds {
				t0 := time.Now()
				if err := k.f(); err != nil {
					return err
				}
				*k.out = append(*k.out, time.Since(t0))
			}
		}
	}
	q := func(ds []time.Duration, p float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[int(p*float64(len(s)-1))]
	}
	fmt.Printf("calls            p50        p99\n")
	fmt.Printf("tools/call  %4d  %-9v  %v\n", len(d), q(d, 0.5).Round(time.Microsecond), q(d, 0.99).Round(time.Microsecond))
	fmt.Printf("LDP task    %4d  %-9v  %v\n", len(l), q(l, 0.5).Round(time.Microsecond), q(l, 0.99).Round(time.Microsecond))
	fmt.Printf("added at p50: %v; ratio of the medians: %.2f\n", (q(l, 0.5) - q(d, 0.5)).Round(time.Microsecond), float64(q(l, 0.5))/float64(q(d, 0.5)))
	return s.Close(ctx, "done")
}
