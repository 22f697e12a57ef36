package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/gate"
)

// complete is step 7: B signs an attestation and its client sends
// delegateos/complete; the chain shows the delegation completed.
func (d *demo) complete(ctx context.Context) error {
	d.n.step(7, "B finishes: a signed attestation, sent with delegateos/complete")
	d.n.say("B writes its output and signs an attestation of the work, claiming what it spent (%s microcents).", commas(d.spent))
	output, err := json.Marshal(map[string]string{"summary": strings.Join(d.firstLines[:2], " / ")})
	if err != nil {
		return err
	}
	if err := os.WriteFile(d.path("output.json"), append(output, '\n'), 0o644); err != nil {
		return err
	}
	d.n.evidence("output.json: " + string(output))
	if _, err := d.cli(ctx, "attest", "create", "--key", "b.key", "--contract", "contract-b.json", "--delegation", delegationB,
		"--output", "output.json", "--cost", strconv.FormatInt(d.spent, 10), "--out", "attestation-b.json"); err != nil {
		return err
	}
	raw, err := os.ReadFile(d.path("attestation-b.json"))
	if err != nil {
		return err
	}
	a, err := attest.Parse(raw)
	if err != nil {
		return notNarrated("attestation-b.json: %v", err)
	}
	d.n.send("%s  delegationId %s, attestation %s (attestation-b.json)", gate.MethodComplete, delegationB, a.ID)
	res, err := d.b.complete(ctx, gate.CompleteParams{DelegationID: delegationB, Attestation: raw})
	if err != nil {
		return err
	}
	if res.Status != "completed" || !res.Verified || res.AttestationID != a.ID || len(res.Problems) > 0 {
		return notNarrated("delegateos/complete: %+v", res)
	}
	score := "none"
	if res.Score != nil {
		score = strconv.FormatFloat(*res.Score, 'f', -1, 64)
	}
	d.n.receive("status %s, verified %t, score %s", res.Status, res.Verified, score)
	d.n.say("The proxy checked B's signature, the output against the contract's schema and check, and a cost")
	d.n.say("within the contract's budget and not below the %s microcents it recorded itself.", commas(d.spent))
	out, err := d.cli(ctx, "chain", "show", "--workspace", workspaceDir,
		"--name", "root="+d.id("ROOT"), "--name", "A="+d.id("A"), "--name", "B="+d.id("B"))
	if err != nil {
		return err
	}
	d.n.evidence(out)
	if st, err := d.recorded(delegationB); err != nil || st != chain.StatusCompleted || !strings.Contains(out, delegationB) {
		return notNarrated("delegation %s is recorded %q (%v), not completed", delegationB, st, err)
	}
	return nil
}

// showReputation is step 8: B's profile in the RDP workspace.
func (d *demo) showReputation(ctx context.Context) error {
	d.n.step(8, "B's reputation has new signals")
	d.n.say("The proxy evaluated the completed delegation in the reputation workspace (%s/): B's profile", workspaceDir)
	d.n.say("gained a reliability signal, with the RDP contract it was scored under as evidence.")
	out, err := d.cli(ctx, "reputation", "show", "--workspace", workspaceDir, d.id("B"))
	if err != nil {
		return err
	}
	if !hasSignals(out, "reliability") {
		return notNarrated("B's profile shows no reliability signal:\n%s", out)
	}
	d.n.evidence(out)
	return nil
}

// hasSignals reports whether the table reputation show prints has a row
// for the dimension with a score and at least one signal:
// DIMENSION SCORE CONF N BAR.
func hasSignals(out, dimension string) bool {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || f[0] != dimension {
			continue
		}
		_, scoreErr := strconv.ParseFloat(f[1], 64)
		n, nErr := strconv.Atoi(f[3])
		return scoreErr == nil && nErr == nil && n > 0
	}
	return false
}
