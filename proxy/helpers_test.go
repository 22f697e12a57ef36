package proxy

import (
	"bytes"
	"io"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/policy"
)

// testSession is a session whose token grants mcp:echo:* at no cost, as
// proxybench sets one up, without an upstream process: the test drives
// the pumps' frame handlers itself.
func testSession(tb testing.TB, log *zap.Logger, toClient, toServer io.Writer) *session {
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
	g := &gate.Gate{Policy: pol, Verifier: v, Budget: budget.NewMemory()}
	return &session{
		cfg: Config{
			// As Run sets it: the tests change the Gate's fields through
			// Gate, which Gates holds too.
			Gate: g, Gates: gate.NewCurrent(&gate.Snapshot{Policy: pol, Gate: g}),
			SessionToken: tok.String(), MaxFrameBytes: DefaultMaxFrameBytes,
		},
		log:      log,
		toClient: newFrameWriter(toClient),
		toServer: newFrameWriter(toServer),
		pending:  newPendingTable(),
	}
}
