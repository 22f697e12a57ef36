package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
)

// The task contracts A gives B: a summary, checked by length.
const (
	summarySchema       = `{"type":"object","required":["summary"],"properties":{"summary":{"type":"string"}}}`
	summaryVerification = `{"method":"deterministic_check","checkName":"string_length","checkParams":{"field":"summary","min":20}}`
)

// grant is step 1: the root mints A's token.
func (d *demo) grant(ctx context.Context) error {
	d.n.step(1, "The root grants A docs:read on /project/**, with a budget")
	d.n.say("The root signs a token for A: read anything under /project, %s microcents (a microcent is a", commas(budgetA))
	d.n.say("millionth of a cent), valid for an hour, and at most two more hops of delegation.")
	out, err := d.cliTo(ctx, "a.tok", "dct", "mint", "--key", "root.key", "--to", d.id("A"), "--cap", "docs:read:/project/**",
		"--contract", contractA, "--delegation", delegationA, "--budget", strconv.Itoa(budgetA), "--ttl", "1h", "--max-depth", "2")
	if err != nil {
		return err
	}
	tok, err := d.checkToken(out, "A", delegationA, "docs:read:/project/**")
	if err != nil {
		return err
	}
	d.n.evidence(fmt.Sprintf("a.tok: %d characters, delegation %s", len(tok.String()), delegationA))
	return nil
}

// attenuate is step 2: A narrows its token for B and signs a task contract.
func (d *demo) attenuate(ctx context.Context) error {
	d.n.step(2, "A delegates to B: /project/sub/* only, with a task contract")
	d.n.say("A narrows its token for B (one directory, %s microcents) and signs a contract saying what B", commas(budgetB))
	d.n.say("must deliver and how it will be checked. The token is bound to the contract by its ID.")
	if err := d.delegateToB(ctx, "b.tok", "contract-b.json", delegationB, contractB, budgetB, "Summarize the sub-project notes", "/project/sub/notes.md"); err != nil {
		return err
	}
	out, err := d.cli(ctx, "dct", "inspect", "--token", "@b.tok")
	if err != nil {
		return err
	}
	// The end of the inspection says what the chain grants B.
	if i := strings.LastIndex(out, "\neffective"); i >= 0 {
		out = "(…)" + out[i:]
	}
	d.n.evidence(out)
	return nil
}

// delegateToB has A attenuate a.tok for B and sign the contract it is bound
// to (steps 2 and 9).
func (d *demo) delegateToB(ctx context.Context, tokFile, contractFile, delegation, contractID string, budget int64, title, input string) error {
	out, err := d.cliTo(ctx, tokFile, "dct", "attenuate", "--key", "a.key", "--token", "@a.tok", "--to", d.id("B"),
		"--cap", "docs:read:/project/sub/*", "--budget", strconv.FormatInt(budget, 10), "--contract", contractID, "--delegation", delegation)
	if err != nil {
		return err
	}
	if _, err := d.checkToken(out, "B", delegation, "docs:read:/project/sub/*"); err != nil {
		return err
	}
	if _, err := d.cli(ctx, "contract", "create", "--key", "a.key", "--id", contractID, "--title", title,
		"--inputs", `{"path":"`+input+`"}`, "--output-schema", summarySchema, "--verification", summaryVerification,
		"--budget", strconv.FormatInt(budget, 10), "--ttl", "1h", "--require", "docs:read", "--out", contractFile); err != nil {
		return err
	}
	b, err := os.ReadFile(d.path(contractFile))
	if err != nil {
		return err
	}
	c, err := contract.Parse(b)
	if err == nil {
		err = c.Verify()
	}
	if err != nil {
		return notNarrated("%s: %v", contractFile, err)
	}
	if a, _ := identity.NormalizePrincipal(d.id("A")); c.Issuer != a || c.ID != contractID {
		return notNarrated("%s is contract %s issued by %s, not %s issued by A", contractFile, c.ID, c.Issuer, contractID)
	}
	return nil
}

// checkToken parses a token the CLI printed and checks that it grants the
// named agent exactly capability under the given delegation.
func (d *demo) checkToken(out, holder, delegation, capability string) (*dct.Token, error) {
	tok, err := dct.Parse(strings.TrimSpace(out))
	if err != nil {
		return nil, notNarrated("the CLI printed a token that does not parse: %v", err)
	}
	eff := tok.Inspect().Effective
	want, _ := identity.NormalizePrincipal(d.id(holder))
	if eff == nil || eff.Holder != want || eff.DelegationID != delegation ||
		len(eff.Capabilities) != 1 || eff.Capabilities[0].String() != capability {
		return nil, notNarrated("the token does not grant %s %s under %s: %+v", holder, capability, delegation, eff)
	}
	return tok, nil
}

// id is the value of a shell variable the narration defined (ROOT, A, B).
func (d *demo) id(name string) string {
	for _, v := range d.n.vars {
		if v.name == name {
			return v.value
		}
	}
	panic("demo: no variable " + name)
}

// readContract reads a contract file of the demo's directory as the raw
// JSON delegateos/delegate carries.
func (d *demo) readContract(file string) (json.RawMessage, error) {
	return os.ReadFile(d.path(file))
}

// commas writes n with thousands separators, as the narration reads best.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
