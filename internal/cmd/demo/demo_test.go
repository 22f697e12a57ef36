package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/revocation"
)

func TestMain(m *testing.M) { os.Exit(mcptest.Run(m)) }

// binaries returns a directory holding delegateos and docserver, built
// once for every test of the package, without the race detector.
func binaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for bin, pkg := range map[string]string{delegateosBinary: "./cmd/delegateos", docserverBinary: "./examples/docserver"} {
		if err := os.Symlink(mcptest.Build(t, pkg, false), filepath.Join(dir, bin)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The narration, in order: each step's heading and the evidence that it did
// what it says.
var narrated = []string{
	"0. Keys, documents and a policy",
	"$ ROOT=$(delegateos id --key root.key)",
	"$ A=$(delegateos id --key a.key --did)",
	"policy.yaml: ok",
	"1. The root grants A docs:read on /project/**, with a budget",
	`$ delegateos dct mint --key root.key --to "$A" --cap 'docs:read:/project/**'`,
	"2. A delegates to B: /project/sub/* only, with a task contract",
	`$ delegateos dct attenuate --key a.key --token @a.tok --to "$B" --cap 'docs:read:/project/sub/*'`,
	"$ delegateos contract create --key a.key --id ct_b00000000001",
	"effective", "docs:read:/project/sub/*",
	"3. B's client connects through the proxy and delegates the task",
	"$ delegateos proxy --policy policy.yaml -- docserver --root docs",
	"← (no tools)",
	"→ delegateos/delegate\n     contract            contract-b.json (ct_b00000000001, signed by A)\n     dct                 b.tok\n",
	"← accepted: true, delegationId del_b00000000001",
	"4. B sees only the tools it may use",
	"← list_files, read_file, search",
	"5. An allowed call, and one out of scope",
	`→ tools/call read_file {"path":"/project/sub/notes.md"}`,
	`← "Weekly notes: the parser landed and the proxy demo is next."  (3,000 of 10,000 microcents spent)`,
	`→ tools/call read_file {"path":"/project/secret.md"}`,
	`← refused: JSON-RPC error -32001 "DCT verification failed: capability_not_granted — tool read_file needs docs:read:/project/secret.md: not granted by this token"`,
	"type    capability_not_granted",
	`detail  tool read_file needs docs:read:/project/secret.md: not granted by this token`,
	"6. The budget runs out",
	"(9,000 of 10,000 microcents spent)",
	"type    budget_exceeded",
	"detail  this call costs 3000 microcents; delegation del_b00000000001 has spent 9000 of 10000",
	"7. B finishes: a signed attestation, sent with delegateos/complete",
	"$ delegateos attest create --key b.key --contract contract-b.json --delegation del_b00000000001",
	"→ delegateos/complete  delegationId del_b00000000001, attestation att_",
	"← status completed, verified true, score 1",
	`$ delegateos chain show --workspace ws --name "root=$ROOT" --name "A=$A" --name "B=$B"`,
	"del_a00000000001", "root", "A", "[active]",
	"del_b00000000001", "A", "B", "[completed]",
	"8. B's reputation has new signals",
	`$ delegateos reputation show --workspace ws "$B"`,
	"reliability",
	"9. A revokes a second delegation; the running proxy enforces it",
	"← accepted: true, delegationId del_b00000000002",
	"← allowed",
	"$ delegateos revoke --key a.key --token @b2.tok --block 1 --list revocations.json",
	"(scope chain) in revocations.json",
	"type    revoked",
	"of this token has been revoked",
	"Done in",
	"proxy.log",
}

// The whole demo against the real binaries: every step is narrated, in
// order, with its evidence; the files it points to say the same.
func TestDemo(t *testing.T) {
	bin := binaries(t)
	dir := filepath.Join(t.TempDir(), "demo")
	var out bytes.Buffer
	start := time.Now()
	if err := run(t.Context(), config{bin: bin, dir: dir}, &out); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	t.Logf("the demo took %v", time.Since(start))
	text := out.String()
	rest := text
	for _, want := range narrated {
		i := strings.Index(rest, want)
		if i < 0 {
			t.Fatalf("the narration lacks %q after what came before; it was:\n%s", want, text)
		}
		rest = rest[i+len(want):]
	}
	// The command lines show the IDs as variables, never literally.
	for _, name := range []string{"ROOT", "A", "B"} {
		id := regexp.MustCompile(`(?m)^\s+\$ ` + name + `=.*\n\s+(\S+)$`).FindStringSubmatch(text)
		if id == nil {
			t.Fatalf("no %s= line in the narration", name)
		}
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "$ ") && strings.Contains(l, id[1]) {
				t.Errorf("a command line shows %s's ID instead of $%s: %s", name, name, l)
			}
		}
	}
	if !strings.Contains(text, "Everything is still in "+dir) {
		t.Errorf("the narration does not say where the files are (%s)", dir)
	}

	// The records the proxy left behind agree with the narration.
	ds, err := chain.Load(filepath.Join(dir, workspaceDir, "delegations.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]chain.Status{}
	for _, d := range ds {
		status[d.ID] = d.Status
	}
	if status[delegationA] != chain.StatusActive || status[delegationB] != chain.StatusCompleted {
		t.Errorf("recorded delegations: %v", status)
	}
	if _, ok := status[delegationB2]; !ok {
		t.Errorf("the second delegation was not recorded: %v", status)
	}
	// A's revocation is in the list, and cuts off the second token only.
	revs, err := revocation.OpenFile(filepath.Join(dir, revocationsFile))
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]bool{"b.tok": false, "b2.tok": true} {
		s, err := readFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := dct.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, revoked, err := revs.Revoked(tok.RevocationIDs(), tok.Signers()); err != nil || revoked != want {
			t.Errorf("%s revoked: %t, %v; want %t", file, revoked, err, want)
		}
	}
	for _, f := range []string{"spend.log", "proxy.log", "output.json", "attestation-b.json",
		"ws/task-contracts", "ws/attestations", "ws/reputation", "ws/contracts"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// A step that does not behave as narrated stops the demo with an error
// naming the step, and the directory is left for a look. Here the upstream
// is not an MCP server (delegateos itself stands in for the docserver), so
// the proxy cannot start a session.
func TestDemoFailsLoudly(t *testing.T) {
	real := binaries(t)
	bin := t.TempDir()
	for _, name := range []string{delegateosBinary, docserverBinary} {
		data, err := os.ReadFile(filepath.Join(real, delegateosBinary))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "demo")
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := run(ctx, config{bin: bin, dir: dir}, &out)
	if err == nil {
		t.Fatalf("the demo succeeded without an MCP server:\n%s", out.String())
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "step 3: ") || !strings.Contains(msg, "files so far are in "+dir) {
		t.Errorf("error: %v", err)
	}
	if strings.Contains(out.String(), "4. ") {
		t.Errorf("the demo went on after step 3 failed:\n%s", out.String())
	}
}

// The exit status and message of the command itself.
func TestMainStatus(t *testing.T) {
	bin := binaries(t)
	var stdout, stderr bytes.Buffer
	if code := mainStatus([]string{"-bin", t.TempDir()}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "make demo builds both") {
		t.Errorf("-bin without the binaries: exit %d, %q", code, stderr.String())
	}
	stderr.Reset()
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := mainStatus([]string{"-bin", bin, "-dir", full}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "is not empty") {
		t.Errorf("-dir not empty: exit %d, %q", code, stderr.String())
	}
	if code := mainStatus([]string{"extra"}, &stdout, &stderr); code != 2 {
		t.Errorf("an argument: exit %d", code)
	}
}
