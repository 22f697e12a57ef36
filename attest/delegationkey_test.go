package attest

import (
	"bytes"
	"strings"
	"testing"
)

// The delegation key is signed when present, checked for shape, and
// absent (not empty) when not given, so attestations made before keys
// keep their bytes and signatures.
func TestDelegationKey(t *testing.T) {
	const key = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	plain := mustMarshal(t, testAttestation(t))
	if bytes.Contains(plain, []byte("delegationKey")) {
		t.Fatalf("an attestation without a key names one: %s", plain)
	}
	p := testParams()
	p.DelegationKey = key
	b := mustMarshal(t, create(t, aliceKey, p))
	a, err := Parse(b)
	if err != nil || a.Verify() != nil || a.DelegationKey != key {
		t.Fatalf("Parse = %+v, %v", a, err)
	}
	other := strings.Replace(string(b), key, "BAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 1)
	if a, err := Parse([]byte(other)); err == nil && a.Verify() == nil {
		t.Fatal("an attestation whose delegation key was changed still verifies")
	}
	for _, bad := range []string{"AAAA", key + "A", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB", strings.Repeat("+", 43)} {
		p.DelegationKey = bad
		if _, err := Create(aliceKey, p, t1); err == nil {
			t.Errorf("created with delegation key %q", bad)
		}
		if _, err := Parse(bytes.Replace(b, []byte(key), []byte(bad), 1)); err == nil {
			t.Errorf("parsed with delegation key %q", bad)
		}
	}
}
