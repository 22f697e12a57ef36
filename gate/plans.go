package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/strictjson"
	"github.com/delegateos/delegateos/internal/timestamp"
)

// planOf returns the plans that bind the delegation at link i of a
// verified chain as one of their sub-tasks: those whose issuer signed its
// block (the delegatee of the link before) and whose parent is that link.
// A plan naming a delegation its issuer did not make binds nothing.
func planOf(v contract.PlanView, links []dct.ChainLink, i int) []contract.PlanRef {
	if i == 0 {
		return nil
	}
	var out []contract.PlanRef
	for _, r := range v.SubTaskOf(links[i].Key) {
		if links[i-1].Key == r.Plan.ParentDelegationKey && links[i-1].Delegatee == r.Plan.Issuer {
			out = append(out, r)
		}
	}
	return out
}

// Pending says why calls under a verified chain must wait: some
// delegation of the chain is a sub-task of a recorded plan, and a sub-task
// it depends on is not recorded completed (a verified attestation whose
// verdict passed, delegateos/complete). A plan file naming a delegation of
// the chain that does not verify, or plans that cannot be read, refuse too.
// "" means nothing is pending.
func (d *Delegations) Pending(scope *dct.AuthorizedScope) string {
	if d.Plans == nil {
		return ""
	}
	v, err := d.Plans.View()
	if err != nil {
		return fmt.Sprintf("the decomposition plans cannot be read (%v), so whether delegation %s may start is unknown", err, scope.DelegationID)
	}
	if why := v.Unreadable(); why != "" && mayBePlanned(scope) {
		// A plan behind the entry may name any delegated link as a
		// sub-task: those wait until it reads.
		return fmt.Sprintf("delegation %s may be covered by a decomposition plan that cannot be read (%s); it waits until the plan reads", scope.DelegationID, why)
	}
	for i, l := range scope.Chain {
		if why := v.Tampered(l.Key); why != "" {
			return fmt.Sprintf("delegation %s is named by a %s; it stays refused until the plan is restored", l.DelegationID, why)
		}
		if why := v.Missing(l.Key); why != "" {
			return fmt.Sprintf("delegation %s: %s; it stays refused until the plan is restored", l.DelegationID, why)
		}
		for _, r := range planOf(v, scope.Chain, i) {
			if waits := d.waitsFor(r); len(waits) > 0 {
				return fmt.Sprintf("sub-task %q (delegation %s) of plan %s waits for %s to complete", r.SubTask.ID, l.DelegationID, r.Plan.ID, strings.Join(waits, " and "))
			}
		}
	}
	return ""
}

// mayBePlanned reports whether a plan could make a chain wait: only a
// delegated link can be a plan's sub-task, so a root token runs (its
// completion, which a plan splitting it governs, waits in splitBy).
func mayBePlanned(scope *dct.AuthorizedScope) bool {
	return len(scope.Chain) > 1
}

// waitsFor lists the dependencies of a sub-task without a recorded
// completion, each with where it stands.
func (d *Delegations) waitsFor(r contract.PlanRef) []string {
	var out []string
	for _, dep := range r.SubTask.DependsOn {
		st := r.Plan.SubTask(dep)
		if st == nil {
			out = append(out, fmt.Sprintf("%q (not in the plan)", dep))
			continue
		}
		status, recorded, err := d.status(st.DelegationKey)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("%q (delegation %s: its status cannot be read)", dep, st.DelegationID))
		case !recorded:
			out = append(out, fmt.Sprintf("%q (delegation %s: not started)", dep, st.DelegationID))
		case status != chain.StatusCompleted:
			out = append(out, fmt.Sprintf("%q (delegation %s: %s)", dep, st.DelegationID, status))
		}
	}
	return out
}

// tokenLinks is the chain of a recorded delegation's token as the gate
// sees it: each block's delegation ID, key and delegatee. It reads the
// token unverified: use it on tokens a Verifier accepted when recorded.
func tokenLinks(token string) ([]dct.ChainLink, error) {
	tok, err := dct.Parse(token)
	if err != nil {
		return nil, err
	}
	t := tok.Unverified()
	keys := tok.DelegationKeys()
	links := []dct.ChainLink{{DelegationID: t.Authority.DelegationID, Key: keys[0], Delegatee: t.Authority.Delegatee}}
	for i, a := range t.Attenuations {
		links = append(links, dct.ChainLink{DelegationID: a.DelegationID, Key: keys[i+1], Delegatee: a.Delegatee})
	}
	return links, nil
}

// pendingFor is Pending for a recorded delegation: a sub-task is not
// completed before its dependencies either.
func (d *Delegations) pendingFor(del chain.Delegation) string {
	links, err := tokenLinks(del.DCT.Token)
	if err != nil {
		return "its token cannot be read"
	}
	return d.Pending(&dct.AuthorizedScope{Chain: links})
}

// splitBy checks the sub-tasks of every plan that splits a delegation
// (issued by its delegatee, who decomposed it): each must have ended (one
// never delegated ends, failed, at its deadline), and
// the attestation must cite each one's attestation. It returns the
// sub-tasks that failed and are not optional, which fail the delegation,
// or an error refusing the completion for now.
func (d *Delegations) splitBy(del chain.Delegation, children []string) ([]string, error) {
	if d.Plans == nil {
		return nil, nil
	}
	v, err := d.Plans.View()
	if err != nil {
		return nil, internalError("the decomposition plans cannot be read")
	}
	if why := v.Tampered(del.Key); why != "" {
		return nil, invalidParams("delegation %s cannot be completed: it is named by a %s", del.ID, why)
	}
	if why := v.Missing(del.Key); why != "" {
		return nil, invalidParams("delegation %s cannot be completed: %s", del.ID, why)
	}
	if why := v.Unreadable(); why != "" {
		return nil, invalidParams("delegation %s cannot be completed for now: a decomposition plan that may split it cannot be read (%s)", del.ID, why)
	}
	plans := v.SplitOf(del.Key)
	cited := map[string]bool{}
	for _, c := range children {
		cited[c] = true
	}
	var failed []string
	for _, p := range plans {
		if p.Issuer != del.To {
			continue
		}
		for _, st := range p.SubTasks {
			sub, err := d.Chain.Get(st.DelegationKey)
			switch {
			case err != nil && !isNotExist(err):
				return nil, internalError("the delegation chain cannot be read")
			case err != nil && pastDeadline(st.Deadline, d.now()):
				// Never delegated, and now it cannot be done in time: it
				// counts as failed rather than holding the parent forever.
				if !st.Optional {
					failed = append(failed, fmt.Sprintf("sub-task %q of plan %s was never started before its deadline %s", st.ID, p.ID, st.Deadline))
				}
			case err != nil || sub.Status == chain.StatusActive:
				state := "not started"
				if err == nil {
					state = string(sub.Status)
				}
				return nil, invalidParams("delegation %s is split by plan %s: sub-task %q (delegation %s) has not ended (%s); it completes only with its sub-tasks' completions", del.ID, p.ID, st.ID, st.DelegationID, state)
			case sub.AttestationID != "" && !cited[sub.AttestationID] && (sub.Status == chain.StatusCompleted || !st.Optional):
				// A failed optional sub-task need not be cited: citing it
				// would fail the parent's recursive verification (§7.3).
				return nil, invalidParams("delegation %s is split by plan %s: the attestation must cite sub-task %q's attestation %s in childAttestations", del.ID, p.ID, st.ID, sub.AttestationID)
			case sub.Status != chain.StatusCompleted && !st.Optional:
				failed = append(failed, fmt.Sprintf("sub-task %q of plan %s %s", st.ID, p.ID, sub.Status))
			}
		}
	}
	return failed, nil
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// pastDeadline reports whether a sub-task's deadline (checked when its
// plan was read) is before now.
func pastDeadline(deadline string, now time.Time) bool {
	t, err := timestamp.Parse(deadline)
	return err == nil && now.After(t)
}

// Hold returns the budget levels of a call with, at each level split by a
// recorded plan, the unspent allotments of the plan's sub-tasks that have
// not ended taken off the limit, unless the call is under one of those
// sub-tasks (whose own level bounds it). So the decomposer's own calls,
// or calls under delegations outside the plan, cannot spend what the plan
// gave its sub-tasks; once a sub-task ends, what it did not spend returns.
// Sub-task spend is read before the reservation: a sub-task spending
// meanwhile only makes the hold larger than needed, never smaller.
func (d *Delegations) Hold(scope *dct.AuthorizedScope, levels []budget.Level, spent func(key string) int64) []budget.Level {
	if d.Plans == nil {
		return levels
	}
	v, err := d.Plans.View()
	if err != nil {
		// Pending refuses the call on the same error before it gets here.
		return levels
	}
	now := d.now()
	var out []budget.Level
	for i, l := range scope.Chain {
		plans := v.SplitOf(l.Key)
		if len(plans) == 0 {
			continue
		}
		var held int64
		for _, p := range plans {
			if p.Issuer != l.Delegatee || (i+1 < len(scope.Chain) && p.SubTaskByKey(scope.Chain[i+1].Key) != nil) {
				continue
			}
			held += OpenAllotted(p, levels[i].Key, now, d.ended, spent)
		}
		if held == 0 {
			continue
		}
		if out == nil {
			out = append([]budget.Level{}, levels...)
		}
		out[i].Limit = max(0, out[i].Limit-held)
	}
	if out == nil {
		return levels
	}
	return out
}

// OpenAllotted is what a plan allotted to its sub-tasks that have not
// ended, less what each spent (read at levelKey, the budget level of the
// delegation the plan splits, plus the sub-task's segment). A sub-task
// ends when ended says so (its delegation recorded completed or failed)
// or at its deadline (its token's expiry): it can spend nothing more, and
// completion counts it as ended too; calls in flight are still reserved
// on the real levels.
func OpenAllotted(p *contract.Plan, levelKey string, now time.Time, ended func(key string) bool, spent func(key string) int64) int64 {
	var held int64
	for _, st := range p.SubTasks {
		if ended(st.DelegationKey) || pastDeadline(st.Deadline, now) {
			continue
		}
		held += max(0, st.BudgetMicrocents-spent(levelKey+budgetSegment(st.DelegationID)))
	}
	return held
}

// ended reports whether a delegation is recorded completed or failed; a
// status that cannot be read is not ended (its allotment stays held).
func (d *Delegations) ended(key string) bool {
	status, recorded, err := d.status(key)
	return err == nil && recorded && status != chain.StatusActive
}

// allottedUnder is OpenAllotted over the recorded plans that split the
// parent token's delegation, issued by its holder.
// A plan with the ID skip (sent again) is not counted against itself.
func (d *Delegations) allottedUnder(v contract.PlanView, parentTok *dct.Token, holder, skip string, now time.Time) int64 {
	keys := parentTok.DelegationKeys()
	levelKey := BudgetKey(parentTok)
	spent := func(key string) int64 { return 0 }
	if d.SpentAt != nil {
		spent = d.SpentAt
	}
	var held int64
	for _, p := range v.SplitOf(keys[len(keys)-1]) {
		if p.Issuer == holder && p.ID != skip {
			held += OpenAllotted(p, levelKey, now, d.ended, spent)
		}
	}
	return held
}

func budgetSegment(id string) string { return "/" + strconv.Itoa(len(id)) + ":" + id }

func rejectPlan(reason, format string, args ...any) DecomposeResult {
	return DecomposeResult{Reason: reason, Details: fmt.Sprintf(format, args...)}
}

// Decompose handles delegateos/decompose: a delegate splits its own task
// in-band. The parent token (params.dct, or the session's) must verify
// and its delegation be recorded active with its contract (delegateos/
// delegate first) and not itself waiting on a dependency; the plan, its
// child contracts and tokens must pass contract.CheckDecomposition against
// the parent and what was spent under it, and each token must verify. The
// plan is then recorded where the gate enforces it.
func (d *Delegations) Decompose(params json.RawMessage, sessionToken string) (DecomposeResult, error) {
	var p DecomposeParams
	if err := strictjson.Unmarshal(params, &p); err != nil {
		return DecomposeResult{}, invalidParams("%v", err)
	}
	if len(p.Plan) == 0 || len(p.Contracts) > contract.MaxSubTasks || len(p.DCTs) > contract.MaxSubTasks {
		return DecomposeResult{}, invalidParams("plan is required, with at most %d contracts and dcts", contract.MaxSubTasks)
	}
	if d.Plans == nil {
		return DecomposeResult{}, internalError("this proxy records no decomposition plans")
	}
	parentToken := p.DCT
	if parentToken == "" {
		parentToken = sessionToken
	}
	if parentToken == "" {
		return DecomposeResult{}, invalidParams("no parent token: give dct, or send delegateos/delegate first")
	}
	tv := d.verifier()
	if tv == nil {
		return rejectPlan(RejectInvalidToken, "this proxy trusts no root, so no token can be accepted"), nil
	}
	now := d.now()
	scope, err := tv.VerifyChain(parentToken, now)
	if err != nil {
		return rejectPlan(RejectInvalidToken, "the parent token: %v", err), nil
	}
	parentTok, err := dct.Parse(parentToken)
	if err != nil {
		return rejectPlan(RejectInvalidToken, "the parent token: %v", err), nil
	}
	keys := parentTok.DelegationKeys()
	if st, recorded, err := d.status(keys[len(keys)-1]); err != nil || !recorded || st != chain.StatusActive {
		return rejectPlan(RejectChainInvariant, "delegation %s is not recorded active here (%s): send delegateos/delegate with its contract first", scope.DelegationID, st), nil
	}
	if why := d.Pending(scope); why != "" {
		return rejectPlan(string(DependencyPending), "%s", why), nil
	}
	parent, err := d.Contracts.Get(scope.ContractID)
	if err != nil {
		return rejectPlan(RejectInvalidContract, "contract %s of delegation %s is not recorded here: send delegateos/delegate with it first", scope.ContractID, scope.DelegationID), nil
	}
	dec := &contract.Decomposition{}
	if dec.Plan, err = contract.ParsePlan(p.Plan); err != nil {
		return rejectPlan(RejectInvalidParams, "%v", err), nil
	}
	for i, raw := range p.Contracts {
		c, err := contract.Parse(raw)
		if err != nil {
			return rejectPlan(RejectInvalidContract, "contracts[%d]: %v", i, err), nil
		}
		dec.Contracts = append(dec.Contracts, c)
	}
	for i, s := range p.DCTs {
		if _, err := tv.VerifyChain(s, now); err != nil {
			return rejectPlan(RejectInvalidToken, "dcts[%d]: %v", i, err), nil
		}
		tok, err := dct.Parse(s)
		if err != nil {
			return rejectPlan(RejectInvalidToken, "dcts[%d]: %v", i, err), nil
		}
		dec.Tokens = append(dec.Tokens, tok)
	}
	var spent int64
	if d.Spent != nil {
		spent = d.Spent(parentTok)
	}
	// One plan at a time: each is checked against what earlier plans of
	// the parent still hold, and recorded before the next is checked.
	d.planMu.Lock()
	defer d.planMu.Unlock()
	v, err := d.Plans.View()
	if err != nil {
		return DecomposeResult{}, internalError("the decomposition plans cannot be read: %v", err)
	}
	if why := v.Unreadable(); why != "" {
		return rejectPlan(string(DependencyPending), "what earlier plans allotted of delegation %s is unknown: %s", scope.DelegationID, why), nil
	}
	if err := contract.CheckDecomposition(dec, parent, parentTok, scope, spent, d.allottedUnder(v, parentTok, scope.Delegatee, dec.Plan.ID, now), now); err != nil {
		return rejectPlan(RejectInvalidParams, "%v", err), nil
	}
	for _, c := range dec.Contracts {
		if err := d.Contracts.Put(c); err != nil {
			return rejectPlan(RejectContractMismatch, "contract %s: %v", c.ID, err), nil
		}
	}
	if err := d.Plans.Put(dec.Plan); err != nil {
		if errors.Is(err, contract.ErrPlan) {
			return rejectPlan(RejectInvalidParams, "%v", err), nil
		}
		return DecomposeResult{}, internalError("the plan cannot be recorded: %v", err)
	}
	return DecomposeResult{Accepted: true, PlanID: dec.Plan.ID}, nil
}

// checkPlanned refuses to delegate a sub-task contract (one whose inputs
// name the plan it belongs to, as decompose writes them) unless that plan
// is recorded here and made this very delegation: otherwise its
// dependencies would not be enforced.
func (d *Delegations) checkPlanned(c *contract.TaskContract, tok *dct.Token) *DelegateResult {
	var in struct {
		Decomposition *struct {
			PlanID    string `json:"planId"`
			SubTaskID string `json:"subTaskId"`
		} `json:"decomposition"`
	}
	if json.Unmarshal(c.Task.Inputs, &in) != nil || in.Decomposition == nil || !contract.ValidPlanID(in.Decomposition.PlanID) {
		return nil
	}
	planID, stID := in.Decomposition.PlanID, in.Decomposition.SubTaskID
	if d.Plans == nil {
		r := reject(RejectInvalidContract, "contract %s is sub-task %q of plan %s, and this proxy records no plans, so its dependencies could not be enforced", c.ID, stID, planID)
		return &r
	}
	p, err := d.Plans.Get(planID)
	if err != nil {
		r := reject(RejectInvalidContract, "contract %s is sub-task %q of plan %s, which is not recorded in this proxy's workspace: record it there (contract decompose --workspace, or delegateos/decompose) so that its dependencies are enforced", c.ID, stID, planID)
		return &r
	}
	keys := tok.DelegationKeys()
	if st := p.SubTask(stID); st == nil || st.ContractID != c.ID || st.DelegationKey != keys[len(keys)-1] {
		r := reject(RejectContractMismatch, "contract %s names sub-task %q of plan %s, but the plan made no such delegation with this token", c.ID, stID, planID)
		return &r
	}
	return nil
}
