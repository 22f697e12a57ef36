package contract

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/sig"
	"github.com/delegateos/delegateos/internal/strictjson"
	"github.com/delegateos/delegateos/internal/timestamp"
)

// PlanIDPrefix starts every plan ID; twelve lowercase hex digits follow,
// as in the DelegateOS reference's DecompositionPlan.
const PlanIDPrefix = "plan_"

// The strategies of a plan. The reference names sequential and parallel;
// dag is a plan whose dependsOn lists are given explicitly.
const (
	StrategySequential = "sequential"
	StrategyParallel   = "parallel"
	StrategyDAG        = "dag"
)

// ErrPlan is wrapped by every error about a plan's structure, signature or
// validity against its parent.
var ErrPlan = errors.New("invalid decomposition plan")

func planErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrPlan, fmt.Sprintf(format, args...))
}

// Plan is a signed decomposition plan: the reference's DecompositionPlan
// (id, parentContractId, strategy, subTasks, createdAt) with what makes it
// enforceable added. Every member but Signature is signed, so nothing of a
// plan can be edited after decompose wrote it.
type Plan struct {
	ID               string    `json:"id"`
	ParentContractID string    `json:"parentContractId"`
	Strategy         string    `json:"strategy"`
	SubTasks         []SubTask `json:"subTasks"`
	CreatedAt        string    `json:"createdAt"`
	// Issuer is the decomposer: the parent token's delegatee, who signs
	// the plan, its child contracts and its sub-task tokens.
	Issuer string `json:"issuer"`
	// ParentDelegationID and ParentDelegationKey name the delegation the
	// plan splits: the parent token's last block (dct.Token.DelegationKeys).
	ParentDelegationID  string `json:"parentDelegationId"`
	ParentDelegationKey string `json:"parentDelegationKey"`
	// Signature is the issuer's base64url Ed25519 signature over the
	// canonical JSON of every other member.
	Signature string `json:"signature,omitempty"`
}

// SubTask is the reference's SubTask with its assignee and the contract
// and delegation decompose made for it.
type SubTask struct {
	ID               string           `json:"id"`
	Title            string           `json:"title"`
	Description      string           `json:"description"`
	Capabilities     []dct.Capability `json:"capabilities"`
	BudgetMicrocents int64            `json:"budgetMicrocents"`
	Deadline         string           `json:"deadline"`
	DependsOn        []string         `json:"dependsOn"`
	// Optional marks a sub-task whose failure does not fail the task the
	// plan splits (the sub-tasks that depend on it still wait for a
	// completion).
	Optional bool `json:"optional,omitempty"`
	// Assignee is the principal ID the sub-task's token is delegated to.
	Assignee string `json:"assignee"`
	// ContractID is the sub-task's child contract.
	ContractID string `json:"contractId"`
	// DelegationID and DelegationKey name the sub-task token's last block.
	DelegationID  string `json:"delegationId"`
	DelegationKey string `json:"delegationKey"`
}

// NewPlanID returns PlanIDPrefix and 12 random lowercase hex digits read
// from r (crypto/rand.Reader when nil).
func NewPlanID(r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	b := make([]byte, idHexLen/2)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("plan ID: %w", err)
	}
	return PlanIDPrefix + hex.EncodeToString(b), nil
}

// ValidPlanID reports whether id is PlanIDPrefix and 12 lowercase hex digits.
func ValidPlanID(id string) bool {
	return len(id) == len(PlanIDPrefix)+idHexLen && id[:len(PlanIDPrefix)] == PlanIDPrefix && isLowerHex(id[len(PlanIDPrefix):])
}

func isLowerHex(s string) bool {
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// SubTask returns the sub-task with the ID, or nil.
func (p *Plan) SubTask(id string) *SubTask {
	for i := range p.SubTasks {
		if p.SubTasks[i].ID == id {
			return &p.SubTasks[i]
		}
	}
	return nil
}

// SubTaskByKey returns the sub-task whose delegation has the key, or nil.
func (p *Plan) SubTaskByKey(key string) *SubTask {
	for i := range p.SubTasks {
		if p.SubTasks[i].DelegationKey == key {
			return &p.SubTasks[i]
		}
	}
	return nil
}

// Sign fills in the issuer and signs the plan with key after checking its
// structure.
func (p *Plan) Sign(key *identity.Keypair) error {
	p.Issuer, p.Signature = key.ID(), ""
	if err := p.checkStructure(); err != nil {
		return err
	}
	s, err := sig.Sign(key.PrivateKey(), p)
	if err != nil {
		return err
	}
	p.Signature = s
	return nil
}

// Verify checks the plan's structure and its issuer's signature over every
// member but the signature.
func (p *Plan) Verify() error {
	if err := p.checkStructure(); err != nil {
		return err
	}
	pub, err := identity.PublicKey(p.Issuer)
	if err != nil {
		return planErr("issuer: %v", err)
	}
	unsigned := *p
	unsigned.Signature = ""
	if p.Signature == "" || sig.Verify(pub, &unsigned, p.Signature) != nil {
		return planErr("plan %s: the signature does not verify against its issuer %s", clip(p.ID), clip(p.Issuer))
	}
	return nil
}

// Marshal returns the plan as canonical JSON, signature included.
func (p *Plan) Marshal() ([]byte, error) { return canon.Marshal(p) }

// ParsePlan decodes a signed plan strictly (no duplicate, re-cased or
// unknown members, at most MaxPlanSize bytes) and checks its structure;
// Verify checks its signature.
func ParsePlan(data []byte) (*Plan, error) {
	if len(data) > MaxPlanSize {
		return nil, planErr("%d bytes, over the limit of %d", len(data), MaxPlanSize)
	}
	var p Plan
	if err := strictjson.Unmarshal(data, &p); err != nil {
		return nil, planErr("%v", err)
	}
	if err := p.checkStructure(); err != nil {
		return nil, err
	}
	// A null where an array is signed would read as an empty one: refuse
	// any input whose canonical form is not the plan's.
	got, err := canon.Marshal(&p)
	if err != nil {
		return nil, planErr("%v", err)
	}
	want, err := jcs.Transform(data)
	if err != nil || !bytes.Equal(got, want) {
		return nil, planErr("the plan holds values (null, or numbers written otherwise) that do not read back as written")
	}
	return &p, nil
}

// checkStructure checks what a plan must be on its own, whoever signed it:
// the IDs, sizes, times, capabilities and a dependency graph without
// cycles over known sub-tasks.
func (p *Plan) checkStructure() error {
	if !ValidPlanID(p.ID) {
		return planErr("id %q is not %q and 12 lowercase hex digits", clip(p.ID), PlanIDPrefix)
	}
	if !ValidID(p.ParentContractID) {
		return planErr("parentContractId %q is not a contract ID", clip(p.ParentContractID))
	}
	if _, err := identity.PublicKey(p.Issuer); err != nil {
		return planErr("issuer: %v", err)
	}
	if !dct.ValidDelegationKey(p.ParentDelegationKey) {
		return planErr("parentDelegationKey %q is not a delegation key", clip(p.ParentDelegationKey))
	}
	if p.ParentDelegationID == "" || len(p.ParentDelegationID) > dct.MaxStringLen {
		return planErr("parentDelegationId is empty or too long")
	}
	if _, err := timestamp.Parse(p.CreatedAt); err != nil || len(p.CreatedAt) > maxTimestampLen {
		return planErr("createdAt %q is not an RFC 3339 time", clip(p.CreatedAt))
	}
	if err := checkSubTasks(p.Strategy, p.SubTasks); err != nil {
		return err
	}
	keys := map[string]bool{p.ParentDelegationKey: true}
	contracts := map[string]bool{p.ParentContractID: true}
	for i := range p.SubTasks {
		st := &p.SubTasks[i]
		if _, err := identity.PublicKey(st.Assignee); err != nil {
			return planErr("sub-task %s: assignee: %v", quoted(st.ID), err)
		}
		if !ValidID(st.ContractID) || contracts[st.ContractID] {
			return planErr("sub-task %s: contractId %q is not a contract ID of its own", quoted(st.ID), clip(st.ContractID))
		}
		if !dct.ValidDelegationKey(st.DelegationKey) || keys[st.DelegationKey] {
			return planErr("sub-task %s: delegationKey %q is not a delegation key of its own", quoted(st.ID), clip(st.DelegationKey))
		}
		if st.DelegationID == "" || len(st.DelegationID) > dct.MaxStringLen {
			return planErr("sub-task %s: delegationId is empty or too long", quoted(st.ID))
		}
		contracts[st.ContractID], keys[st.DelegationKey] = true, true
	}
	return nil
}

// checkSubTasks checks the sub-tasks as the plan file gives them: IDs,
// titles, capabilities, budgets, deadlines, and dependencies that name
// known sub-tasks, follow the strategy and form no cycle.
func checkSubTasks(strategy string, sts []SubTask) error {
	switch strategy {
	case StrategySequential, StrategyParallel, StrategyDAG:
	default:
		return planErr("strategy %q is not %s, %s or %s", clip(strategy), StrategySequential, StrategyParallel, StrategyDAG)
	}
	if len(sts) == 0 {
		return planErr("the plan has no sub-tasks")
	}
	if len(sts) > MaxSubTasks {
		return planErr("the plan has %d sub-tasks, over the limit of %d", len(sts), MaxSubTasks)
	}
	ids := map[string]bool{}
	for i := range sts {
		st := &sts[i]
		if !validSubTaskID(st.ID) {
			return planErr("sub-task %d: id %q must be 1 to %d letters, digits, '_', '-' or '.'", i+1, clip(st.ID), MaxSubTaskIDLen)
		}
		if ids[st.ID] {
			return planErr("sub-task id %s is used twice", quoted(st.ID))
		}
		ids[st.ID] = true
		if st.Title == "" || len(st.Title) > MaxTitleLen || len(st.Description) > MaxDescriptionLen {
			return planErr("sub-task %s: the title must be 1 to %d bytes and the description at most %d", quoted(st.ID), MaxTitleLen, MaxDescriptionLen)
		}
		if len(st.Capabilities) == 0 || len(st.Capabilities) > dct.MaxCapabilities {
			return planErr("sub-task %s: give 1 to %d capabilities", quoted(st.ID), dct.MaxCapabilities)
		}
		for _, c := range st.Capabilities {
			if c.Namespace == "" || c.Action == "" || c.Resource == "" || len(c.Namespace) > dct.MaxStringLen || len(c.Action) > dct.MaxStringLen || len(c.Resource) > dct.MaxStringLen {
				return planErr("sub-task %s: capability %q needs a namespace, an action and a resource of at most %d bytes each", quoted(st.ID), clip(c.String()), dct.MaxStringLen)
			}
		}
		if st.BudgetMicrocents < 0 || st.BudgetMicrocents > canon.MaxSafeInteger {
			return planErr("sub-task %s: budgetMicrocents %d is not between 0 and %d", quoted(st.ID), st.BudgetMicrocents, int64(canon.MaxSafeInteger))
		}
		if _, err := timestamp.Parse(st.Deadline); err != nil || len(st.Deadline) > maxTimestampLen {
			return planErr("sub-task %s: deadline %q is not an RFC 3339 time", quoted(st.ID), clip(st.Deadline))
		}
		if st.DependsOn == nil {
			return planErr("sub-task %s: dependsOn is missing (an empty list is [])", quoted(st.ID))
		}
		if len(st.DependsOn) > MaxSubTasks {
			return planErr("sub-task %s: depends on %d sub-tasks, over the limit of %d", quoted(st.ID), len(st.DependsOn), MaxSubTasks)
		}
	}
	for i := range sts {
		st := &sts[i]
		seen := map[string]bool{}
		for _, dep := range st.DependsOn {
			switch {
			case dep == st.ID:
				return planErr("sub-task %s depends on itself", quoted(st.ID))
			case !ids[dep]:
				return planErr("sub-task %s depends on unknown sub-task %s", quoted(st.ID), quoted(dep))
			case seen[dep]:
				return planErr("sub-task %s lists dependency %s twice", quoted(st.ID), quoted(dep))
			}
			seen[dep] = true
		}
		switch {
		case strategy == StrategyParallel && len(st.DependsOn) > 0:
			return planErr("sub-task %s depends on %s, but a parallel plan's sub-tasks depend on none (use strategy dag)", quoted(st.ID), quoted(st.DependsOn[0]))
		case strategy == StrategySequential && i == 0 && len(st.DependsOn) > 0:
			return planErr("sub-task %s is first in a sequential plan and depends on nothing", quoted(st.ID))
		case strategy == StrategySequential && i > 0 && (len(st.DependsOn) != 1 || st.DependsOn[0] != sts[i-1].ID):
			return planErr("sub-task %s of a sequential plan must depend on exactly the one before it, %s (use strategy dag)", quoted(st.ID), quoted(sts[i-1].ID))
		}
	}
	if cycle := findCycle(sts); cycle != nil {
		return planErr("the dependencies form a cycle: %s", joinQuoted(cycle, " → "))
	}
	return nil
}

// findCycle returns the sub-task IDs of a dependency cycle, first repeated
// last, or nil.
func findCycle(sts []SubTask) []string {
	deps := make(map[string][]string, len(sts))
	for _, st := range sts {
		deps[st.ID] = st.DependsOn
	}
	const (
		unvisited = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(id string) []string
	visit = func(id string) []string {
		switch state[id] {
		case onPath:
			for i, p := range path {
				if p == id {
					return append(append([]string{}, path[i:]...), id)
				}
			}
		case done:
			return nil
		}
		state[id] = onPath
		path = append(path, id)
		for _, d := range deps[id] {
			if c := visit(d); c != nil {
				return c
			}
		}
		path = path[:len(path)-1]
		state[id] = done
		return nil
	}
	for _, st := range sts {
		if c := visit(st.ID); c != nil {
			return c
		}
	}
	return nil
}

func validSubTaskID(id string) bool {
	if id == "" || len(id) > MaxSubTaskIDLen {
		return false
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// quoted writes a sub-task ID for a message: IDs are checked to be plain
// before most messages, but not before all.
func quoted(id string) string { return fmt.Sprintf("%q", clip(id)) }

func joinQuoted(ids []string, sep string) string {
	var b bytes.Buffer
	for i, id := range ids {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(quoted(id))
	}
	return b.String()
}

// deadlineOf parses a sub-task's deadline (checked by checkSubTasks).
func (st *SubTask) deadlineOf() time.Time {
	t, _ := timestamp.Parse(st.Deadline)
	return t
}
