package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/policy"
)

// The rates the policy file reference (docs/policy.md) shows are the policy's and
// the write_* rule's, with the values its comments give.
func TestREADMEPolicyReferenceRates(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "policy.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "# Policy file reference\n")
	_, rest, ok1 := strings.Cut(rest, "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```\n")
	if !ok || !ok1 || !ok2 {
		t.Fatal("no yaml block under # Policy file reference in docs/policy.md")
	}
	block = strings.Replace(block, "did:key:z6Mk...", "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w", 1)
	p, err := policy.Parse([]byte(block), "/etc/delegateos")
	if err != nil {
		t.Fatal(err)
	}
	if p.Rate != (policy.Rate{N: 600, Per: time.Hour}) {
		t.Errorf("the policy's rate is %+v; the README says 600 in any hour", p.Rate)
	}
	c, err := p.Map("write_notes", []byte(`{"path": "/a"}`))
	if err != nil || c.Rate != (policy.Rate{N: 10, Per: time.Minute}) {
		t.Errorf("write_notes maps to %+v, %v; the README says 10 in any minute", c, err)
	}
	if c, _ := p.Map("read_file", []byte(`{"path": "/a"}`)); !c.Rate.IsZero() {
		t.Errorf("read_file has a rate %+v; the README gives it none", c.Rate)
	}
}
