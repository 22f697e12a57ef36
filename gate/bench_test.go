package gate

import (
	"bytes"
	"testing"
	"time"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/cputime"
	"github.com/delegateos/delegateos/policy"
)

// benchGate is a gate set up as `delegateos proxy --token T --root R` sets
// one up (default policy, spend in memory), and a token granting
// mcp:echo:* at no cost, as proxybench mints it.
func benchGate(tb testing.TB) (*Gate, string) {
	tb.Helper()
	root, err := identity.FromSeed(bytes.Repeat([]byte{1}, 32), "root")
	if err != nil {
		tb.Fatal(err)
	}
	agent, err := identity.FromSeed(bytes.Repeat([]byte{2}, 32), "agent")
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now()
	tok, err := dct.Create(dct.CreateParams{
		Issuer: root, Delegatee: agent.ID(),
		Capabilities: []dct.Capability{{Namespace: "mcp", Action: "echo", Resource: "*"}},
		ContractID:   "ct_bench", DelegationID: "del_bench",
		MaxChainDepth: 1, MaxBudgetMicrocents: 1_000_000_000,
		IssuedAt: now.Add(-time.Minute), ExpiresAt: now.Add(2 * time.Hour),
	})
	if err != nil {
		tb.Fatal(err)
	}
	pol := policy.Default()
	pol.Roots = []string{root.ID()}
	v, err := dct.NewVerifier(dct.Options{Roots: pol.Roots})
	if err != nil {
		tb.Fatal(err)
	}
	return &Gate{Policy: pol, Verifier: v, Budget: budget.NewMemory()}, tok.String()
}

// BenchmarkGate is the gate's part of a call with a cached token: Decide
// (verification from the cache, mapping, budget reservation) and Settle.
func BenchmarkGate(b *testing.B) {
	g, token := benchGate(b)
	benchDecide(b, g, token)
}

// benchDecide is the gate's part of an echo call with token, decided and
// settled in a loop.
func benchDecide(b *testing.B, g *Gate, token string) {
	req := CallRequest{Tool: "echo", Arguments: []byte(`{"text":"hello, proxy"}`), Token: token}
	b.ReportAllocs()
	defer cputime.Report(b)()
	for b.Loop() {
		d := g.Decide(req)
		if !d.Allowed {
			b.Fatal(d.Denial)
		}
		if _, err := g.Settle(&d, 0, false); err != nil {
			b.Fatal(err)
		}
	}
}
