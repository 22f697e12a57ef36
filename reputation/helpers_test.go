package reputation

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/delegateos/delegateos/identity"
)

// t0 is the tests' clock.
var t0 = time.Date(2026, 2, 15, 10, 30, 0, 0, time.UTC)

// testKey returns a deterministic keypair.
func testKey(t testing.TB, seed byte) *identity.Keypair {
	t.Helper()
	k, err := identity.FromSeed(bytes.Repeat([]byte{seed}, 32), "")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// testWorkspace returns a workspace in a new temporary directory.
func testWorkspace(t testing.TB) *Workspace {
	t.Helper()
	w, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// writeWS writes a workspace file relative to the workspace.
func writeWS(t testing.TB, w *Workspace, name, content string) {
	t.Helper()
	path := filepath.Join(w.Dir(), filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// readWS reads a workspace file.
func readWS(t testing.TB, w *Workspace, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.Dir(), filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func ptr[T any](v T) *T { return &v }

// sig is a reliability signal from src.
func sig(src string, score float64, at time.Time) Signal {
	return Signal{Source: src, Dimension: Reliability, Score: score, Timestamp: at}
}

func nan() float64 { return math.NaN() }
