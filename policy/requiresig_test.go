package policy

import "testing"

func TestRequireSignature(t *testing.T) {
	p, err := Parse([]byte("roots: []\nallow_unauthenticated: true\nrequire_signature: true\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !p.RequireSignature {
		t.Fatal("require_signature: true not read")
	}
	if _, err := Parse([]byte("require_signature: yes please\n"), t.TempDir()); err == nil {
		t.Fatal("a non-boolean accepted")
	}
	if p, err := Parse([]byte("allow_unauthenticated: true\n"), t.TempDir()); err != nil || p.RequireSignature {
		t.Fatalf("default: %v, %v", p.RequireSignature, err)
	}
}
