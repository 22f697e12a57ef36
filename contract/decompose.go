package contract

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/timestamp"
)

// PlanSpec is a plan file as its author writes it (YAML, or JSON, which
// is YAML): the reference's DecompositionPlan field names, with an
// assignee per sub-task. IDs, createdAt and the parent contract ID may be
// left out; a reference plan that has them is read as it is.
type PlanSpec struct {
	ID               string
	ParentContractID string
	Strategy         string
	SubTasks         []SubTaskSpec
}

// SubTaskSpec is one sub-task of a PlanSpec. A nil DependsOn in a
// sequential plan is the sub-task before it; an empty Deadline is the
// parent's (or the parent token's expiry, if sooner). OutputSchema and
// Verification, when set, go into the child contract (default: any JSON
// object).
type SubTaskSpec struct {
	SubTask
	OutputSchema, Verification json.RawMessage
}

type planFile struct {
	ID               string        `yaml:"id"`
	ParentContractID string        `yaml:"parentContractId"`
	Strategy         string        `yaml:"strategy"`
	SubTasks         []subTaskFile `yaml:"subTasks"`
	CreatedAt        string        `yaml:"createdAt"`
}

type subTaskFile struct {
	ID               string         `yaml:"id"`
	Title            string         `yaml:"title"`
	Description      string         `yaml:"description"`
	Capabilities     []capFile      `yaml:"capabilities"`
	BudgetMicrocents *int64         `yaml:"budgetMicrocents"`
	Deadline         string         `yaml:"deadline"`
	DependsOn        []string       `yaml:"dependsOn"`
	Assignee         string         `yaml:"assignee"`
	Optional         bool           `yaml:"optional"`
	OutputSchema     map[string]any `yaml:"outputSchema"`
	Verification     map[string]any `yaml:"verification"`
}

type capFile struct {
	Namespace string `yaml:"namespace"`
	Action    string `yaml:"action"`
	Resource  string `yaml:"resource"`
}

// ReadPlanSpec reads a plan file: one YAML (or JSON) document of at most
// MaxPlanSize bytes, with no unknown or repeated field.
func ReadPlanSpec(data []byte) (*PlanSpec, error) {
	if len(data) > MaxPlanSize {
		return nil, planErr("%d bytes, over the limit of %d", len(data), MaxPlanSize)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f planFile
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, planErr("the plan file is empty")
		}
		return nil, planErr("%v", err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, planErr("the plan file holds more than one document")
	}
	s := &PlanSpec{ID: f.ID, ParentContractID: f.ParentContractID, Strategy: f.Strategy}
	for i, st := range f.SubTasks {
		if st.BudgetMicrocents == nil {
			return nil, planErr("sub-task %d (%s): budgetMicrocents is required", i+1, quoted(st.ID))
		}
		sp := SubTaskSpec{SubTask: SubTask{ID: st.ID, Title: st.Title, Description: st.Description,
			BudgetMicrocents: *st.BudgetMicrocents, Deadline: st.Deadline, DependsOn: st.DependsOn, Assignee: st.Assignee, Optional: st.Optional}}
		for _, c := range st.Capabilities {
			sp.Capabilities = append(sp.Capabilities, dct.Capability(c))
		}
		for _, m := range []struct {
			name string
			v    map[string]any
			dst  *json.RawMessage
		}{{"outputSchema", st.OutputSchema, &sp.OutputSchema}, {"verification", st.Verification, &sp.Verification}} {
			if m.v == nil {
				continue
			}
			b, err := json.Marshal(m.v)
			if err != nil {
				return nil, planErr("sub-task %s: %s: %v", quoted(st.ID), m.name, err)
			}
			*m.dst = b
		}
		s.SubTasks = append(s.SubTasks, sp)
	}
	return s, nil
}

// DecomposeParams are what Decompose splits and with what authority.
type DecomposeParams struct {
	// Key is the decomposer's: the parent token's delegatee.
	Key *identity.Keypair
	// Parent is the contract the plan splits, verified by Decompose.
	Parent *TaskContract
	// Token is the parent token, and Scope what a dct.Verifier granted it
	// (its signatures and chain verified).
	Token *dct.Token
	Scope *dct.AuthorizedScope
	// Spent is what has been spent under the parent token already.
	Spent int64
	// Allotted is what earlier recorded plans splitting the parent
	// allotted to sub-tasks not ended, less what those spent: it is
	// promised already, so a new plan cannot allot it again.
	Allotted int64
	Spec     *PlanSpec
	// Assignee is the principal of sub-tasks that name none.
	Assignee string
	// Now is the clock (zero: time.Now()); Rand the source of new IDs
	// (nil: crypto/rand).
	Now  time.Time
	Rand io.Reader
}

// Decomposition is a signed plan with, per sub-task in plan order, its
// signed child contract and its token: the parent token attenuated for the
// assignee to the sub-task's capabilities, budget and deadline, bound to
// the child contract.
type Decomposition struct {
	Plan      *Plan
	Contracts []*TaskContract
	Tokens    []*dct.Token
}

// Decompose validates a plan against its parent and writes it: the
// reference's rules (budgets sum within the parent's, deadlines within
// its, known dependencies without cycles) and stricter ones (capabilities
// covered by the parent token's, budgets within what remains of it, unique
// IDs, a delegation depth the chain allows, the decomposer holding the
// token bound to the parent contract).
func Decompose(p DecomposeParams) (*Decomposition, error) {
	now := p.Now
	if now.IsZero() {
		now = time.Now()
	}
	if err := checkParent(p); err != nil {
		return nil, err
	}
	plan, err := draftPlan(p, now)
	if err != nil {
		return nil, err
	}
	if err := checkSubTasks(plan.Strategy, plan.SubTasks); err != nil {
		return nil, err
	}
	if err := checkWithinParent(p, plan, now); err != nil {
		return nil, err
	}
	out := &Decomposition{Plan: plan}
	for i := range plan.SubTasks {
		c, tok, err := delegateSubTask(p, plan, i, now)
		if err != nil {
			return nil, err
		}
		out.Contracts, out.Tokens = append(out.Contracts, c), append(out.Tokens, tok)
	}
	if err := plan.Sign(p.Key); err != nil {
		return nil, err
	}
	return out, nil
}

// checkParent: the parent contract verifies, the token is bound to it
// (§5.2) and held by the key that decomposes.
func checkParent(p DecomposeParams) error {
	if p.Key == nil || p.Parent == nil || p.Token == nil || p.Scope == nil || p.Spec == nil {
		return errors.New("decompose: a key, the parent contract, its token and a plan are required")
	}
	if err := p.Parent.Verify(); err != nil {
		return fmt.Errorf("the parent contract: %w", err)
	}
	if err := CheckBinding(p.Parent, p.Scope); err != nil {
		return planErr("the token does not carry the parent contract: %v", err)
	}
	if p.Scope.Delegatee != p.Key.ID() {
		return planErr("the token is delegated to %s, not to the key's principal %s: decompose with the token holder's key", p.Scope.Delegatee, p.Key.ID())
	}
	if p.Spec.ParentContractID != "" && p.Spec.ParentContractID != p.Parent.ID {
		return planErr("the plan names parent contract %q, not %s", clip(p.Spec.ParentContractID), p.Parent.ID)
	}
	return nil
}

// draftPlan is the plan file filled in: IDs, defaults and assignees.
func draftPlan(p DecomposeParams, now time.Time) (*Plan, error) {
	keys := p.Token.DelegationKeys()
	plan := &Plan{ID: p.Spec.ID, ParentContractID: p.Parent.ID, Strategy: p.Spec.Strategy, CreatedAt: timestamp.Format(now),
		ParentDelegationID: p.Scope.DelegationID, ParentDelegationKey: keys[len(keys)-1]}
	if plan.ID == "" {
		id, err := NewPlanID(p.Rand)
		if err != nil {
			return nil, err
		}
		plan.ID = id
	} else if !ValidPlanID(plan.ID) {
		return nil, planErr("id %q is not %q and 12 lowercase hex digits (leave it out for a new one)", clip(plan.ID), PlanIDPrefix)
	}
	allEmpty := true
	for _, st := range p.Spec.SubTasks {
		allEmpty = allEmpty && len(st.DependsOn) == 0
	}
	for i, sp := range p.Spec.SubTasks {
		st := sp.SubTask
		st.Capabilities = append([]dct.Capability{}, st.Capabilities...)
		st.DependsOn = append([]string{}, st.DependsOn...)
		if plan.Strategy == StrategySequential && allEmpty && i > 0 {
			st.DependsOn = []string{p.Spec.SubTasks[i-1].ID}
		}
		if st.Deadline == "" {
			st.Deadline = defaultDeadline(p)
		}
		who := st.Assignee
		if who == "" {
			who = p.Assignee
		}
		if who == "" {
			return nil, planErr("sub-task %s has no assignee: give assignee (a principal ID or did:key) in the plan, or --assignee", quoted(st.ID))
		}
		id, err := identity.NormalizePrincipal(who)
		if err != nil {
			return nil, planErr("sub-task %s: assignee: %v", quoted(st.ID), err)
		}
		st.Assignee = id
		plan.SubTasks = append(plan.SubTasks, st)
	}
	return plan, nil
}

// defaultDeadline is the parent contract's deadline, or the parent
// token's expiry when that comes first.
func defaultDeadline(p DecomposeParams) string {
	due, err := p.Parent.Deadline()
	if exp, e2 := timestamp.Parse(p.Scope.ExpiresAt); err == nil && e2 == nil && exp.Before(due) {
		return timestamp.Format(exp)
	}
	return p.Parent.Constraints.Deadline
}

// checkWithinParent: each sub-task within the parent token and contract.
func checkWithinParent(p DecomposeParams, plan *Plan, now time.Time) error {
	sc := p.Scope
	if sc.ChainDepth+1 > sc.MaxChainDepth {
		return planErr("the parent token is at chain depth %d of at most %d, so its sub-tasks cannot be delegated (depth %d); mint or attenuate it with a larger --max-depth", sc.ChainDepth, sc.MaxChainDepth, sc.ChainDepth+1)
	}
	if p.Parent.Constraints.MaxChainDepth < 1 {
		return planErr("the parent contract %s allows no further delegation (maxChainDepth %d)", p.Parent.ID, p.Parent.Constraints.MaxChainDepth)
	}
	limit := min(sc.RemainingBudgetMicrocents, p.Parent.Constraints.MaxBudgetMicrocents)
	remaining := limit - p.Spent - p.Allotted
	var sum int64
	for i := range plan.SubTasks {
		sum += plan.SubTasks[i].BudgetMicrocents
	}
	if sum > remaining {
		return planErr("the sub-tasks' budgets sum to %d microcents, over the %d that remain of the parent's budget (%d, less %d spent and %d allotted by earlier plans to sub-tasks not ended)", sum, max(remaining, 0), limit, p.Spent, p.Allotted)
	}
	parentDue, err := p.Parent.Deadline()
	if err != nil {
		return err
	}
	expires, err := timestamp.Parse(sc.ExpiresAt)
	if err != nil {
		return planErr("the parent token's expiry %q: %v", clip(sc.ExpiresAt), err)
	}
	for i := range plan.SubTasks {
		st := &plan.SubTasks[i]
		due := st.deadlineOf()
		switch {
		case due.After(parentDue):
			return planErr("sub-task %s: deadline %s is after the parent contract's deadline %s", quoted(st.ID), st.Deadline, p.Parent.Constraints.Deadline)
		case due.After(expires):
			return planErr("sub-task %s: deadline %s is after the parent token expires (%s)", quoted(st.ID), st.Deadline, sc.ExpiresAt)
		case !due.After(now):
			return planErr("sub-task %s: deadline %s has passed", quoted(st.ID), st.Deadline)
		}
		for _, c := range st.Capabilities {
			if !coveredBy(c, sc.Capabilities) {
				return planErr("sub-task %s: capability %s is not covered by the parent token's capabilities (%s)", quoted(st.ID), c, capList(sc.Capabilities))
			}
		}
	}
	return nil
}

func coveredBy(c dct.Capability, caps []dct.Capability) bool {
	for _, p := range caps {
		if c.SubsetOf(p) {
			return true
		}
	}
	return false
}

func capList(caps []dct.Capability) string {
	s := make([]string, len(caps))
	for i, c := range caps {
		s[i] = c.String()
	}
	return strings.Join(s, ", ")
}

// delegateSubTask signs sub-task i's child contract and attenuates the
// parent token for its assignee, bound to that contract; the plan records
// both.
func delegateSubTask(p DecomposeParams, plan *Plan, i int, now time.Time) (*TaskContract, *dct.Token, error) {
	st := &plan.SubTasks[i]
	sp := &p.Spec.SubTasks[i]
	inputs, err := json.Marshal(map[string]any{"decomposition": map[string]any{
		"planId": plan.ID, "subTaskId": st.ID, "parentContractId": plan.ParentContractID, "dependsOn": st.DependsOn}})
	if err != nil {
		return nil, nil, err
	}
	schema, spec := sp.OutputSchema, sp.Verification
	if schema == nil {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	if spec == nil {
		spec = json.RawMessage(`{"method":"schema_match","schema":` + string(schema) + `}`)
	}
	var required []string
	for _, c := range st.Capabilities {
		r := c.Namespace + ":" + c.Action
		if !containsString(required, r) {
			required = append(required, r)
		}
	}
	remainingDepth := p.Scope.MaxChainDepth - p.Scope.ChainDepth - 1
	c, err := Create(p.Key, CreateParams{Rand: p.Rand, Title: st.Title, Description: st.Description, Inputs: inputs,
		OutputSchema: schema, Verification: spec, MaxBudgetMicrocents: st.BudgetMicrocents, Deadline: st.deadlineOf(),
		MaxChainDepth: min(p.Parent.Constraints.MaxChainDepth-1, remainingDepth), RequiredCapabilities: required}, now)
	if err != nil {
		return nil, nil, planErr("sub-task %s: its contract: %v", quoted(st.ID), err)
	}
	delID, err := newDelegationID(p.Rand)
	if err != nil {
		return nil, nil, err
	}
	caps, budget, due := append([]dct.Capability{}, st.Capabilities...), st.BudgetMicrocents, st.deadlineOf()
	tok, err := dct.Attenuate(p.Token, dct.AttenuateParams{Attenuator: p.Key, Delegatee: st.Assignee, DelegationID: delID,
		ContractID: c.ID, Capabilities: &caps, MaxBudgetMicrocents: &budget, ExpiresAt: &due, Now: now})
	if err != nil {
		return nil, nil, planErr("sub-task %s: its token: %v", quoted(st.ID), err)
	}
	keys := tok.DelegationKeys()
	st.ContractID, st.DelegationID, st.DelegationKey = c.ID, delID, keys[len(keys)-1]
	return c, tok, nil
}

func newDelegationID(r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	b := make([]byte, 6)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("delegation ID: %w", err)
	}
	return "del_" + hex.EncodeToString(b), nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// CheckDecomposition checks a decomposition made elsewhere (sent in-band
// by the decomposer, who holds the key): the plan verifies and is the
// parent token holder's, for the parent contract and the token's last
// delegation; it passes every rule Decompose applies against the parent;
// and each sub-task's contract and token are the ones the plan names,
// exactly as narrow as the plan says. scope is what a dct.Verifier
// granted parentTok; the sub-task tokens' signatures are for the caller's
// Verifier.
func CheckDecomposition(d *Decomposition, parent *TaskContract, parentTok *dct.Token, scope *dct.AuthorizedScope, spent, allotted int64, now time.Time) error {
	if d == nil || d.Plan == nil || parent == nil || parentTok == nil || scope == nil {
		return errors.New("decomposition: a plan, the parent contract and its token are required")
	}
	plan := d.Plan
	if err := plan.Verify(); err != nil {
		return err
	}
	keys := parentTok.DelegationKeys()
	switch {
	case plan.Issuer != scope.Delegatee:
		return planErr("the plan is signed by %s, not by the parent token's holder %s", plan.Issuer, scope.Delegatee)
	case plan.ParentContractID != parent.ID:
		return planErr("the plan splits contract %s, not the parent contract %s", plan.ParentContractID, parent.ID)
	case plan.ParentDelegationKey != keys[len(keys)-1] || plan.ParentDelegationID != scope.DelegationID:
		return planErr("the plan splits delegation %s (key %s), not the parent token's %s", plan.ParentDelegationID, plan.ParentDelegationKey, scope.DelegationID)
	}
	if err := parent.Verify(); err != nil {
		return fmt.Errorf("the parent contract: %w", err)
	}
	if err := CheckBinding(parent, scope); err != nil {
		return planErr("the token does not carry the parent contract: %v", err)
	}
	if err := checkWithinParent(DecomposeParams{Parent: parent, Scope: scope, Spent: spent, Allotted: allotted}, plan, now); err != nil {
		return err
	}
	if len(d.Contracts) != len(plan.SubTasks) || len(d.Tokens) != len(plan.SubTasks) {
		return planErr("the plan has %d sub-tasks but %d contracts and %d tokens came with it", len(plan.SubTasks), len(d.Contracts), len(d.Tokens))
	}
	for i := range plan.SubTasks {
		if err := checkSubTaskGrant(plan, i, d.Contracts[i], d.Tokens[i], keys); err != nil {
			return err
		}
	}
	return nil
}

// checkSubTaskGrant: sub-task i's contract and token are the plan's.
func checkSubTaskGrant(plan *Plan, i int, c *TaskContract, tok *dct.Token, parentKeys []string) error {
	st := &plan.SubTasks[i]
	if c == nil || tok == nil {
		return planErr("sub-task %s: its contract or token is missing", quoted(st.ID))
	}
	if err := c.Verify(); err != nil {
		return planErr("sub-task %s: its contract: %v", quoted(st.ID), err)
	}
	if c.ID != st.ContractID || c.Issuer != plan.Issuer || c.Constraints.MaxBudgetMicrocents != st.BudgetMicrocents {
		return planErr("sub-task %s: contract %s is not the one the plan names (%s, issued by the decomposer, budget %d)", quoted(st.ID), c.ID, st.ContractID, st.BudgetMicrocents)
	}
	keys := tok.DelegationKeys()
	if len(keys) != len(parentKeys)+1 || keys[len(parentKeys)-1] != parentKeys[len(parentKeys)-1] || keys[len(keys)-1] != st.DelegationKey {
		return planErr("sub-task %s: its token is not the parent token attenuated once for delegation key %s", quoted(st.ID), st.DelegationKey)
	}
	u := tok.Unverified()
	a := u.Attenuations[len(u.Attenuations)-1]
	due := st.deadlineOf()
	switch {
	case a.Delegatee != st.Assignee || a.DelegationID != st.DelegationID || a.ContractID != st.ContractID:
		return planErr("sub-task %s: its token delegates %s to %s under contract %s, not what the plan says", quoted(st.ID), a.DelegationID, a.Delegatee, a.ContractID)
	case a.AllowedCapabilities == nil || !sameCaps(*a.AllowedCapabilities, st.Capabilities):
		return planErr("sub-task %s: its token's capabilities are not the plan's (%s)", quoted(st.ID), capList(st.Capabilities))
	case a.MaxBudgetMicrocents == nil || *a.MaxBudgetMicrocents != st.BudgetMicrocents:
		return planErr("sub-task %s: its token's budget is not the plan's %d", quoted(st.ID), st.BudgetMicrocents)
	case a.ExpiresAt == nil:
		return planErr("sub-task %s: its token has no expiry of its own; the plan's deadline is %s", quoted(st.ID), st.Deadline)
	}
	if exp, err := timestamp.Parse(*a.ExpiresAt); err != nil || exp.After(due) {
		return planErr("sub-task %s: its token expires after the plan's deadline %s", quoted(st.ID), st.Deadline)
	}
	return nil
}

func sameCaps(a, b []dct.Capability) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
