package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
)

// delegate is step 3: B's client starts the proxy and delegates the task.
func (d *demo) delegate(ctx context.Context) error {
	d.n.step(3, "B's client connects through the proxy and delegates the task")
	d.n.say("B's MCP client (mcp-go, over stdio) starts the proxy in front of the docserver, as an agent framework would:")
	args := []string{"proxy", "--policy", policyFile, "--", filepath.Join(d.cfg.bin, docserverBinary), "--root", docsDir}
	d.n.command([]string{delegateosBinary, "proxy", "--policy", policyFile, "--", docserverBinary, "--root", docsDir}, "")
	b, err := startAgent(ctx, d.dir, filepath.Join(d.cfg.bin, delegateosBinary), args)
	if err != nil {
		return err
	}
	d.b = b
	d.n.say("Until a delegation arrives the session holds no token, so the proxy lists no tools at all:")
	d.n.send("tools/list")
	tools, err := d.b.tools(ctx)
	if err != nil {
		return err
	}
	if len(tools) > 0 {
		return notNarrated("before delegating, the proxy listed %v", tools)
	}
	d.n.receive("(no tools)")
	if err := d.sendDelegate(ctx, "b.tok", "contract-b.json", delegationB, contractB); err != nil {
		return err
	}
	d.n.say("The proxy checked A's signature on the contract, the token's chain up to ROOT, that the token is bound")
	d.n.say("to the contract and grants what it requires, and recorded the delegation in %s/delegations.jsonl.", workspaceDir)
	return nil
}

// sendDelegate sends delegateos/delegate with a contract and the token
// bound to it; it must be accepted.
func (d *demo) sendDelegate(ctx context.Context, tokFile, contractFile, delegation, contractID string) error {
	c, err := d.readContract(contractFile)
	if err != nil {
		return err
	}
	tok, err := readFile(d.path(tokFile))
	if err != nil {
		return err
	}
	d.n.send("%s", gate.MethodDelegate)
	d.n.evidence(fmt.Sprintf("contract            %s (%s, signed by A)\ndct                 %s\ndelegationId        %s\nparentDelegationId  %s",
		contractFile, contractID, tokFile, delegation, delegationA))
	res, err := d.b.delegate(ctx, gate.DelegateParams{Contract: c, DCT: tok, DCTFormat: dct.Format,
		DelegationID: delegation, ParentDelegationID: delegationA})
	if err != nil {
		return err
	}
	if !res.Accepted || res.DelegationID != delegation {
		return notNarrated("delegateos/delegate was not accepted: %+v", res)
	}
	d.n.receive("accepted: true, delegationId %s", res.DelegationID)
	return nil
}

// listTools is step 4: B's view of the tools.
func (d *demo) listTools(ctx context.Context) error {
	d.n.step(4, "B sees only the tools it may use")
	d.n.say("From now on the session runs under B's token; tools/list is filtered to what that token can use.")
	d.n.send("tools/list")
	tools, err := d.b.tools(ctx)
	if err != nil {
		return err
	}
	want := []string{"list_files", "read_file", "search"}
	got := slices.Sorted(slices.Values(tools))
	if !slices.Equal(got, want) {
		return notNarrated("tools/list shows %v, want %v", tools, want)
	}
	d.n.receive("%s", strings.Join(tools, ", "))
	d.n.say("write_file (docs:write) is gone: B's token grants docs:read only.")
	return nil
}

// callTools is step 5: an allowed call and an out-of-scope one.
func (d *demo) callTools(ctx context.Context) error {
	d.n.step(5, "An allowed call, and one out of scope")
	d.n.say("B reads a file in /project/sub: allowed, forwarded to the docserver and charged %s microcents.", commas(readCost))
	if err := d.read(ctx, "/project/sub/notes.md"); err != nil {
		return err
	}
	d.n.say("B tries /project/secret.md, which A's grant covers but B's does not: the gate refuses it before the")
	d.n.say("docserver sees it, with a JSON-RPC error whose data says why.")
	r, err := d.callRead(ctx, "/project/secret.md")
	if err != nil {
		return err
	}
	if r.refusal == nil || r.refusal.code != gate.DenialCode || r.refusal.typ != string(dct.CapabilityNotGranted) {
		return notNarrated("the out-of-scope call was not refused as capability_not_granted: %+v", r)
	}
	d.showRefusal(r.refusal)
	return nil
}

// spendBudget is step 6: B reads until its budget is spent.
func (d *demo) spendBudget(ctx context.Context) error {
	d.n.step(6, "The budget runs out")
	d.n.say("Each read costs %s microcents and B's token carries %s, so the third read is B's last.",
		commas(readCost), commas(budgetB))
	for _, p := range []string{"/project/sub/plan.md", "/project/sub/notes.md"} {
		if err := d.read(ctx, p); err != nil {
			return err
		}
	}
	r, err := d.callRead(ctx, "/project/sub/plan.md")
	if err != nil {
		return err
	}
	if r.refusal == nil || r.refusal.typ != string(dct.BudgetExceeded) {
		return notNarrated("the read after %d of %d microcents was not refused as budget_exceeded: %+v", d.spent, budgetB, r)
	}
	if want := fmt.Sprintf("spent %d of %d", d.spent, budgetB); !strings.Contains(r.refusal.detail, want) {
		return notNarrated("the refusal does not say %q: %s", want, r.refusal.detail)
	}
	d.showRefusal(r.refusal)
	return nil
}

// read has B read a file under its first delegation; the call must be
// allowed, and it is counted against B's budget.
func (d *demo) read(ctx context.Context, path string) error {
	r, err := d.callRead(ctx, path)
	if err != nil {
		return err
	}
	if r.refusal != nil || r.isError {
		return notNarrated("reading %s was not allowed: %+v", path, r)
	}
	d.spent += readCost
	first, _, _ := strings.Cut(r.text, "\n")
	d.firstLines = append(d.firstLines, first)
	d.n.receive("%q  (%s of %s microcents spent)", first, commas(d.spent), commas(budgetB))
	return nil
}

// callRead sends tools/call read_file and shows it.
func (d *demo) callRead(ctx context.Context, path string) (callResult, error) {
	args := map[string]any{"path": path}
	b, _ := json.Marshal(args)
	d.n.send("tools/call read_file %s", b)
	return d.b.call(ctx, "read_file", args)
}

func (d *demo) showRefusal(r *refusal) {
	d.n.receive("refused: JSON-RPC error %d %q", r.code, r.message)
	d.n.evidence(fmt.Sprintf("type    %s\ndetail  %s", r.typ, r.detail))
}
