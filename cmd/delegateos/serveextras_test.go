package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/revocation"
)

// extrasFixture is a gate with a revocation list file and the extras built
// from the given flags, served on an httptest server.
type extrasFixture struct {
	root, agent *identity.Keypair
	tok         *dct.Token
	gate        *gate.Gate
	current     *gate.Current
	x           *serveExtras
	srv         *httptest.Server
	list        string
}

func newExtrasFixture(t *testing.T, args ...string) *extrasFixture {
	t.Helper()
	dir := t.TempDir()
	f := &extrasFixture{}
	f.root, _ = identity.FromSeed(bytes.Repeat([]byte{1}, 32), "root")
	f.agent, _ = identity.FromSeed(bytes.Repeat([]byte{2}, 32), "agent")
	var err error
	f.tok, err = dct.Create(dct.CreateParams{Issuer: f.root, Delegatee: f.agent.ID(),
		Capabilities: []dct.Capability{{Namespace: "mcp", Action: "echo", Resource: "*"}},
		ContractID:   "ct_extras", DelegationID: "del_extras", MaxChainDepth: 1, MaxBudgetMicrocents: 1000,
		IssuedAt: time.Now().Add(-time.Minute), ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	f.list = filepath.Join(dir, "revocations.json")
	os.WriteFile(f.list, []byte("[]\n"), 0o644)
	revs, err := revocation.OpenFile(f.list)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { revs.Close() })
	pol := policy.Default()
	pol.Roots = []string{f.root.ID()}
	pol.RevocationList = f.list
	v, err := dct.NewVerifier(dct.Options{Roots: pol.Roots, Revocations: revs})
	if err != nil {
		t.Fatal(err)
	}
	f.gate = &gate.Gate{Policy: pol, Verifier: v, Budget: budget.NewMemory()}
	keyFile := filepath.Join(dir, "gate.key")
	gateKey, _ := identity.FromSeed(bytes.Repeat([]byte{3}, 32), "gate")
	identity.SaveKeyFile(keyFile, gateKey)

	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	flags := declareServeExtraFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	f.current = gate.NewCurrent(&gate.Snapshot{Policy: pol, Gate: f.gate})
	if f.x, err = flags.build(pol, revs, keyFile, f.gate, f.current, zap.NewNop(), "/mcp"); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	f.x.mount(mux, func(h http.Handler) http.Handler { return h }, true, func() {})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServeExtrasEndpoints(t *testing.T) {
	f := newExtrasFixture(t, "--require-signature")
	if d := f.gate.Decide(gate.CallRequest{Tool: "echo", Token: f.tok.String()}); !d.Allowed {
		t.Fatalf("denied: %+v", d.Denial)
	}
	code, body := get(t, f.srv.URL+"/metrics")
	if code != 200 || !strings.Contains(body, `delegateos_decisions_total{method="tools/call",result="allowed"} 1`) ||
		!strings.Contains(body, "delegateos_revocation_list_entries 0") {
		t.Fatalf("metrics: %d\n%s", code, body)
	}
	code, body = get(t, f.srv.URL+"/.well-known/agent-card.json")
	var card struct{ DelegateOS map[string]any }
	if code != 200 || json.Unmarshal([]byte(body), &card) != nil ||
		card.DelegateOS["revocationEndpoint"] != f.srv.URL+"/.well-known/delegateos/revocations" ||
		card.DelegateOS["mcpEndpoint"] != f.srv.URL+"/mcp" {
		t.Fatalf("card: %d %s", code, body)
	}

	// The agent signed no block of its token, so its entry is refused;
	// the root's is taken, written to the list and in force at once.
	e, _ := revocation.NewEntry(f.root, f.tok.RevocationIDs()[0], revocation.ScopeChain, time.Now())
	stranger, _ := revocation.NewEntry(f.agent, f.tok.RevocationIDs()[0], revocation.ScopeChain, time.Now())
	for _, c := range []struct {
		e    revocation.Entry
		want int
	}{{stranger, 403}, {e, 202}} {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "delegateos/revoke", "params": map[string]any{"revocation": c.e}})
		resp, err := http.Post(f.srv.URL+"/.well-known/delegateos/revocations", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Fatalf("push by %s: %s, want %d", c.e.RevokedBy, resp.Status, c.want)
		}
	}
	if d := f.gate.Decide(gate.CallRequest{Tool: "echo", Token: f.tok.String()}); d.Allowed || d.Denial.Type != dct.Revoked {
		t.Fatalf("after the pushed revocation: %+v", d)
	}
	if l, err := revocation.Load(f.list); err != nil || l.Len() != 1 {
		t.Fatalf("the list file: %v, %v", l, err)
	}
}

func TestServeExtrasPeers(t *testing.T) {
	a := newExtrasFixture(t)
	b := newExtrasFixture(t, "--revocation-peer", a.srv.URL, "--revocation-poll", "20ms")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- b.x.run(ctx) }()
	defer func() { cancel(); <-done }()
	if d := b.gate.Decide(gate.CallRequest{Tool: "echo", Token: a.tok.String()}); !d.Allowed {
		t.Fatalf("before the revocation: %+v", d.Denial)
	}
	e, _ := revocation.NewEntry(a.root, a.tok.RevocationIDs()[0], revocation.ScopeChain, time.Now())
	if err := revocation.Append(a.list, e); err != nil { // delegateos revoke on a
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if d := b.gate.Decide(gate.CallRequest{Tool: "echo", Token: a.tok.String()}); !d.Allowed && d.Denial.Type == dct.Revoked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the revocation did not reach the peer")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestServeExtrasFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--revocation-peer", "ftp://x"},
		{"--require-signature", "--signature-window", "10ms"},
	} {
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		flags := declareServeExtraFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		pol := policy.Default()
		if _, err := flags.build(pol, nil, "", &gate.Gate{Policy: pol}, nil, zap.NewNop(), "/mcp"); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	flags := declareServeExtraFlags(fs)
	fs.Parse([]string{"--revocation-peer", "http://peer"})
	pol := policy.Default()
	if _, err := flags.build(pol, nil, "", &gate.Gate{Policy: pol}, nil, zap.NewNop(), "/mcp"); err == nil || !strings.Contains(err.Error(), "revocation list") {
		t.Errorf("a peer without a list: %v", err)
	}
}

func TestProxyRefusesRequireSignature(t *testing.T) {
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	os.WriteFile(pol, []byte("allow_unauthenticated: true\nrequire_signature: true\n"), 0o644)
	var out, errb bytes.Buffer
	code := run([]string{"proxy", "--policy", pol, "--", "true"}, strings.NewReader(""), &out, &errb)
	if code != exitUsage || out.Len() != 0 || !strings.Contains(errb.String(), "require_signature") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

// Revocation pushes are taken from the roots of the policy in force: a
// root a reload adds may revoke from then on.
func TestServeExtrasRevocationRootsFollowReload(t *testing.T) {
	f := newExtrasFixture(t)
	other, _ := identity.FromSeed(bytes.Repeat([]byte{9}, 32), "other")
	tok, err := dct.Create(dct.CreateParams{Issuer: other, Delegatee: f.agent.ID(),
		Capabilities: []dct.Capability{{Namespace: "mcp", Action: "echo", Resource: "*"}},
		ContractID:   "ct_extras", DelegationID: "del_other", MaxChainDepth: 1, MaxBudgetMicrocents: 1000,
		IssuedAt: time.Now().Add(-time.Minute), ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := revocation.NewEntry(other, tok.RevocationIDs()[0], revocation.ScopeChain, time.Now())
	push := func() int {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "delegateos/revoke", "params": map[string]any{"revocation": e}})
		resp, err := http.Post(f.srv.URL+"/.well-known/delegateos/revocations", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := push(); code != 403 {
		t.Fatalf("a push by a key that is not a root: %d, want 403", code)
	}
	pol := *f.gate.Policy
	pol.Roots = append([]string{other.ID()}, pol.Roots...)
	if _, err := f.current.Reload(&pol, gate.Options{}, nil); err != nil {
		t.Fatal(err)
	}
	if code := push(); code != 202 {
		t.Fatalf("a push by a root the reload added: %d, want 202", code)
	}
}
