package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/dct"
)

// revoke is step 9: A revokes a second, fresh delegation to B from the
// CLI, and the running proxy refuses B's next call.
func (d *demo) revoke(ctx context.Context) error {
	d.n.step(9, "A revokes a second delegation; the running proxy enforces it")
	d.n.say("A gives B a second task with a fresh token and contract; B's client delegates it and reads a file.")
	if err := d.delegateToB(ctx, "b2.tok", "contract-b2.json", delegationB2, contractB2, budgetB2, "Summarize the plan", "/project/sub/plan.md"); err != nil {
		return err
	}
	if err := d.sendDelegate(ctx, "b2.tok", "contract-b2.json", delegationB2, contractB2); err != nil {
		return err
	}
	r, err := d.callRead(ctx, "/project/sub/plan.md")
	if err != nil {
		return err
	}
	if r.refusal != nil || r.isError {
		return notNarrated("B's read under the second delegation was not allowed: %+v", r)
	}
	d.n.receive("allowed")
	d.n.say("A changes its mind and revokes the block it signed for B, appending to the list the proxy reads.")
	out, err := d.cli(ctx, "revoke", "--key", "a.key", "--token", "@b2.tok", "--block", "1", "--list", revocationsFile)
	if err != nil {
		return err
	}
	d.n.evidence(out)
	tok, err := readFile(d.path("b2.tok"))
	if err != nil {
		return err
	}
	t, err := dct.Parse(tok)
	if err != nil {
		return err
	}
	revoked := t.RevocationIDs()[1]
	if !strings.Contains(out, revoked) {
		return notNarrated("delegateos revoke did not revoke block 1 of b2.tok (%s): %s", revoked, out)
	}
	d.n.say("The proxy looks at the list file on every call and re-reads it when it has changed, so B's")
	d.n.say("next read is refused:")
	return d.refusedAsRevoked(ctx, revoked)
}

// refusedAsRevoked has B read once more: the proxy must refuse the call
// as revoked, naming the revoked block.
func (d *demo) refusedAsRevoked(ctx context.Context, revoked string) error {
	r, err := d.b.call(ctx, "read_file", map[string]any{"path": "/project/sub/plan.md"})
	if err != nil {
		return err
	}
	if r.refusal == nil || r.refusal.typ != string(dct.Revoked) {
		return notNarrated("B's first call after the revocation was not refused as revoked: %+v", r)
	}
	if !strings.Contains(r.refusal.detail, revoked) {
		return notNarrated("the refusal names another block than %s: %s", revoked, r.refusal.detail)
	}
	d.n.send(`tools/call read_file {"path":"/project/sub/plan.md"}`)
	d.showRefusal(r.refusal)
	return d.firstStaysCompleted(ctx)
}

// firstStaysCompleted checks, and says, that revoking the second token left
// the first delegation as it was recorded.
func (d *demo) firstStaysCompleted(ctx context.Context) error {
	if st, err := d.recorded(delegationB); err != nil || st != chain.StatusCompleted {
		return notNarrated("delegation %s is no longer recorded completed: %q %v", delegationB, st, err)
	}
	d.n.say("The revocation names only the second token's block: B's first delegation stays completed.")
	d.n.say("The chain, read together with the revocation list:")
	out, err := d.cli(ctx, "chain", "show", "--workspace", workspaceDir, "--revocations", revocationsFile,
		"--name", "root="+d.id("ROOT"), "--name", "A="+d.id("A"), "--name", "B="+d.id("B"))
	if err != nil {
		return err
	}
	d.n.evidence(out)
	if !strings.Contains(out, delegationB+" A → B  [completed]") || !strings.Contains(out, delegationB2+" A → B  [revoked]") {
		return notNarrated("chain show --revocations does not show %s completed and %s revoked:\n%s", delegationB, delegationB2, out)
	}
	return nil
}

// recorded is a delegation's status in the chain the proxy records.
func (d *demo) recorded(id string) (chain.Status, error) {
	ds, err := chain.Load(filepath.Join(d.dir, workspaceDir, "delegations.jsonl"))
	if err != nil {
		return "", err
	}
	for _, del := range ds {
		if del.ID == id {
			return del.Status, nil
		}
	}
	return "", fmt.Errorf("delegation %s is not recorded", id)
}
