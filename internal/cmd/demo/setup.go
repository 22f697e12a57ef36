package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// documents is the tree the docserver serves, under docs/.
var documents = []struct{ path, text string }{
	{"project/README.md", "# Project\nEverything about the project lives under /project.\n"},
	{"project/secret.md", "Salaries and the production password: for the root operator only.\n"},
	{"project/sub/notes.md", "Weekly notes: the parser landed and the proxy demo is next.\nOpen question: who reviews the budget?\n"},
	{"project/sub/plan.md", "Plan: ship the demo on Friday, then write the release notes.\n"},
}

// The policy's prices, in microcents (a millionth of a cent). B's first
// token carries budgetB, enough for three reads and not four.
const (
	readCost  = 3000
	listCost  = 1000
	writeCost = 5000
	budgetA   = 1_000_000
	budgetB   = 10_000
	// budgetB2 is the second delegation's.
	budgetB2 = 500_000
)

// The IDs of the delegations and task contracts, fixed so the narration
// can name them.
const (
	delegationA  = "del_a00000000001"
	contractA    = "ct_a00000000001"
	delegationB  = "del_b00000000001"
	contractB    = "ct_b00000000001"
	delegationB2 = "del_b00000000002"
	contractB2   = "ct_b00000000002"
)

// Files the demo writes in its directory.
const (
	policyFile      = "policy.yaml"
	revocationsFile = "revocations.json"
	spendFile       = "spend.log"
	proxyLogFile    = "proxy.log"
	workspaceDir    = "ws"
	docsDir         = "docs"
)

func policyText(root string) string {
	return fmt.Sprintf(`# Which root to trust, and what each docserver tool means as a capability.
roots: [%s]
tools:
  - match: read_file
    namespace: docs
    action: read
    resource: {arg: /path}
    cost: %d
  - match: "{list_files,search}"
    namespace: docs
    action: read
    resource: {arg: /path}
    cost: %d
  - match: write_file
    namespace: docs
    action: write
    resource: {arg: /path}
    cost: %d
spend_store: %s
revocation_list: %s
workspace: %s
log: {file: %s}
`, root, readCost, listCost, writeCost, spendFile, revocationsFile, workspaceDir, proxyLogFile)
}

// setUp makes the keys, the documents and the policy.
func (d *demo) setUp(ctx context.Context) error {
	d.n.step(0, "Keys, documents and a policy")
	d.n.say("A root operator and two agents, A and B, each get an Ed25519 key; an ID is the public key.")
	for _, k := range []struct{ file, name string }{{"root.key", "root"}, {"a.key", "A"}, {"b.key", "B"}} {
		if _, err := d.cli(ctx, "keygen", "--out", k.file, "--name", k.name); err != nil {
			return err
		}
	}
	root, err := d.cliVar(ctx, "ROOT", "id", "--key", "root.key")
	if err != nil {
		return err
	}
	if _, err := d.cliVar(ctx, "A", "id", "--key", "a.key", "--did"); err != nil {
		return err
	}
	if _, err := d.cliVar(ctx, "B", "id", "--key", "b.key", "--did"); err != nil {
		return err
	}
	var names []string
	for _, doc := range documents {
		p := filepath.Join(d.dir, docsDir, filepath.FromSlash(doc.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(doc.text), 0o644); err != nil {
			return err
		}
		names = append(names, "/"+doc.path)
	}
	d.n.say("The docserver example will serve %s/: %s.", docsDir, strings.Join(names, ", "))
	if err := os.WriteFile(d.path(policyFile), []byte(policyText(root)), 0o644); err != nil {
		return err
	}
	// The proxy refuses a revocation list that does not exist.
	if err := os.WriteFile(d.path(revocationsFile), []byte("[]\n"), 0o644); err != nil {
		return err
	}
	d.n.say("%s tells the proxy to trust ROOT, what each tool means and costs, and where to keep its records:", policyFile)
	d.n.evidence(policyText("$ROOT"))
	out, err := d.cli(ctx, "policy", "check", policyFile)
	if err != nil {
		return err
	}
	first, _, _ := strings.Cut(out, "\n")
	if first != policyFile+": ok" {
		return notNarrated("policy check says %q", first)
	}
	d.n.evidence(first)
	return nil
}
