package gate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/revocation"
)

// BenchmarkGateFiles is BenchmarkGate with what a proxy with a policy
// workspace and a revocation list adds to every decision: a look at the
// revocation list file (empty here: the revocation package measures
// large lists) and a look at the chain log for the token's delegation.
func BenchmarkGateFiles(b *testing.B) {
	g, token := benchGate(b)
	dir := b.TempDir()
	revs := filepath.Join(dir, "revocations.json")
	if err := os.WriteFile(revs, []byte("[]\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	list, err := revocation.OpenFile(revs)
	if err != nil {
		b.Fatal(err)
	}
	defer list.Close()
	if g.Verifier, err = dct.NewVerifier(dct.Options{Roots: g.Policy.Roots, Revocations: list}); err != nil {
		b.Fatal(err)
	}
	log, err := chain.OpenFile(filepath.Join(dir, "delegations.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	g.Ended = (&Delegations{Chain: log}).Ended
	benchDecide(b, g, token)
}
