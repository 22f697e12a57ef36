package revocation

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/sig"
)

// testTime is the fixed time of every test entry.
var testTime = time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)

// testKey returns the deterministic keypair numbered n.
func testKey(t testing.TB, n byte) *identity.Keypair {
	t.Helper()
	k, err := identity.FromSeed(bytes.Repeat([]byte{n}, 32), fmt.Sprintf("key%d", n))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// testID returns a well-formed revocation ID derived from s.
func testID(s string) string {
	d := sig.Digest([]byte(s))
	return b64.Encode(d[:])
}

func testEntry(t testing.TB, k *identity.Keypair, id string, scope Scope) Entry {
	t.Helper()
	e, err := NewEntry(k, id, scope, testTime)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func testList(t testing.TB, entries ...Entry) *List {
	t.Helper()
	l := NewList()
	for _, e := range entries {
		if err := l.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func signBytes(k *identity.Keypair, canonical []byte) string {
	return sig.SignCanonical(k.PrivateKey(), canonical)
}
