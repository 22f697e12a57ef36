package reputation

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Outcome is how a DelegateOS delegation ended, as the proxy records it.
type Outcome struct {
	// DelegationID is the DelegateOS delegation (required). The RDP
	// contract that tracks it is contracts/<LinkSlug(DelegationID)>.md.
	DelegationID string
	// TaskContractID is the DelegateOS task contract (optional).
	TaskContractID string
	// Delegator and Delegate are principal IDs or did:keys.
	Delegator, Delegate string
	// Ancestors are the principals the delegated authority passed through
	// before Delegator held it, root issuer first (principal IDs or
	// did:keys); the proxy takes them from the delegation's token. Empty
	// means the delegation's chain is not known beyond Delegator.
	Ancestors []string
	// Title describes the task when the contract is created here.
	Title string
	// Passed is whether the delegation completed (true) or failed.
	Passed bool
	// VerificationScore is the output verification's score in [0, 1];
	// nil when there was none, and then accuracy is 1 if Passed, else 0.
	VerificationScore *float64
	// Created is when the delegation was made (zero: now). It is the
	// contract's creation time and the start of the time allowed.
	Created time.Time
	// Deadline is zero when there is none.
	Deadline time.Time
	// CompletedAt is when the delegation ended (zero: now).
	CompletedAt time.Time
	// Completeness and Clarity are the scores to give those criteria (the
	// policy's defaults); nil leaves them to a person: the contract then
	// stays completed, with the measured scores kept, until Evaluate.
	Completeness, Clarity *float64
}

// TimelinessScore scores delivery against a deadline: 1 when on time (or
// without a deadline); when late, 1 minus the lateness as a fraction of
// the time allowed (deadline − created), down to 0. Without a positive
// time allowed, late is 0.
func TimelinessScore(created, deadline, completed time.Time) float64 {
	if deadline.IsZero() || !completed.After(deadline) {
		return 1
	}
	allowed := deadline.Sub(created)
	if allowed <= 0 {
		return 0
	}
	return round(math.Max(0, 1-float64(completed.Sub(deadline))/float64(allowed)), 4)
}

// RecordOutcome records how a delegation ended in the RDP contract linked
// to it, creating the contract if there is none, and drives it along its
// lifecycle: draft → active → completed, and → evaluated when every
// criterion has a score. Accuracy is the verification score, timeliness
// comes from the deadline, completeness and clarity from o's defaults. The
// evaluation's signals go to the delegate's profile (see Evaluate) and are
// returned; when a criterion has no score, the contract stays completed
// with the measured scores kept for Evaluate, and no signals are returned.
//
// A contract at the linked slug that names another delegation, delegator
// or delegate is a conflict (ErrConflict). An outcome for a contract
// already evaluated is a *TransitionError: a delegation is rated once.
//
// An agent never earns reputation from its own delegation: when the
// delegate is the delegator, or appears among o.Ancestors (it delegated,
// directly or through others, to the delegator that now rates it), the
// outcome records nothing, not even the contract, and the error is a
// *SelfDealingError.
func (w *Workspace) RecordOutcome(o Outcome, now time.Time) (*Contract, []Signal, error) {
	delegator, err := CanonicalDID(o.Delegator)
	if err != nil {
		return nil, nil, fmt.Errorf("delegator: %w", err)
	}
	delegate, err := CanonicalDID(o.Delegate)
	if err != nil {
		return nil, nil, fmt.Errorf("delegate: %w", err)
	}
	slug, err := LinkSlug(o.DelegationID)
	if err != nil {
		return nil, nil, err
	}
	if SameAgent(delegate, delegator) {
		return nil, nil, &SelfDealingError{Contract: ContractIDPrefix + slug, Delegate: delegate, Role: SelfDelegator}
	}
	for i, a := range o.Ancestors {
		did, err := CanonicalDID(a)
		if err != nil {
			return nil, nil, fmt.Errorf("ancestor %d: %w", i, err)
		}
		if did == delegate {
			return nil, nil, &SelfDealingError{Contract: ContractIDPrefix + slug, Delegate: delegate, Role: SelfAncestor}
		}
	}
	for name, s := range map[string]*float64{"verification score": o.VerificationScore, "completeness": o.Completeness, "clarity": o.Clarity} {
		if s != nil && (math.IsNaN(*s) || !validScore(*s)) {
			return nil, nil, fmt.Errorf("%w: %s %v is outside [0, 1]", ErrInvalid, name, *s)
		}
	}
	if o.Created.IsZero() {
		o.Created = now
	}
	if o.CompletedAt.IsZero() {
		o.CompletedAt = now
	}

	unlock, err := w.lock(ContractsDir)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	lc, err := w.readContract(slug)
	switch {
	case errors.Is(err, ErrNotFound):
		title := o.Title
		if title == "" {
			title = "DelegateOS delegation " + o.DelegationID
		}
		c, err := w.newContract(ContractParams{
			Delegator: delegator, Delegate: delegate, Task: Task{Description: title},
			Deadline: o.Deadline, DelegationID: o.DelegationID, TaskContractID: o.TaskContractID,
			Created: o.Created,
		})
		if err != nil {
			return nil, nil, err
		}
		lc = &loadedContract{c: c, doc: newContractDocument(c, contractBody(c))}
	case err != nil:
		return nil, nil, err
	default:
		c := lc.c
		if c.Link == nil || c.Link.DelegationID != o.DelegationID {
			return nil, nil, fmt.Errorf("%w: %s exists but is not linked to delegation %s", ErrConflict, rel(ContractsDir, slug), o.DelegationID)
		}
		if c.Delegator != delegator || c.Delegate != delegate {
			return nil, nil, fmt.Errorf("%w: %s is between %s and %s, not %s and %s", ErrConflict, rel(ContractsDir, slug), c.Delegator, c.Delegate, delegator, delegate)
		}
	}
	c := lc.c
	for c.Status == Draft || c.Status == Active {
		if err := step(c, next[c.Status]); err != nil {
			return nil, nil, err
		}
	}
	if c.Status != Completed {
		return nil, nil, &TransitionError{Contract: c.ID(), From: c.Status, To: Completed}
	}

	accuracy := 0.0
	switch {
	case o.VerificationScore != nil:
		accuracy = *o.VerificationScore
	case o.Passed:
		accuracy = 1
	}
	measured := map[string]float64{
		Accuracy:   accuracy,
		Timeliness: TimelinessScore(c.Created, c.Deadline, o.CompletedAt),
	}
	if o.Completeness != nil {
		measured[Completeness] = *o.Completeness
	}
	if o.Clarity != nil {
		measured[Clarity] = *o.Clarity
	}
	scores := make(map[string]float64, len(c.Criteria))
	for name := range c.Criteria {
		if s, ok := measured[name]; ok {
			scores[name] = s
		}
	}
	if len(scores) == len(c.Criteria) {
		return w.evaluateLocked(lc, scores, "", now)
	}
	// A person scores the rest later; keep what was measured.
	if c.Link.Measured == nil {
		c.Link.Measured = map[string]float64{}
	}
	for name, s := range scores {
		c.Link.Measured[name] = s
	}
	setStatus(lc.doc, c)
	setLink(lc.doc, c.Link)
	data, err := lc.doc.encode()
	if err != nil {
		return nil, nil, err
	}
	if err := writeFile(w.path(ContractsDir, c.Slug), data); err != nil {
		return nil, nil, err
	}
	return c, nil, nil
}
