package reputation

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ContractParams describe a new contract.
type ContractParams struct {
	// Slug names the contract file. It must be empty when DelegationID is
	// set: a linked contract is named LinkSlug(DelegationID).
	Slug string
	// Delegator and Delegate are principal IDs (stored as did:key) or
	// DIDs. The delegate's profile slug is that of its existing profile,
	// else AgentSlug(Delegate); a delegate that is not an Ed25519 agent
	// must already have a profile.
	Delegator, Delegate string
	Task                Task
	// Deadline is optional (zero: none).
	Deadline    time.Time
	Scope       *Scope
	Constraints *Constraints
	// Criteria are the evaluation weights; nil means DefaultCriteria. They
	// must sum to 1.0.
	Criteria map[string]float64
	// DelegationID and TaskContractID link the contract to a DelegateOS
	// delegation (optional).
	DelegationID, TaskContractID string
	// Created is the creation time (required: time is injected).
	Created time.Time
}

// loadedContract is a contract with the document it was read from.
type loadedContract struct {
	c   *Contract
	doc *document
}

func parseContractFile(data []byte, slug string) (*loadedContract, []Problem, error) {
	d := &decoder{file: rel(ContractsDir, slug)}
	doc, err := parseDocument(data)
	if err != nil {
		le := &lineError{msg: err.Error()}
		errors.As(err, &le)
		d.problems = append(d.problems, Problem{File: d.file, Line: le.line, Message: le.msg, Severity: SeverityError})
		return nil, d.problems, d.err()
	}
	c := d.decodeContract(doc, slug)
	if err := d.err(); err != nil {
		return nil, d.problems, err
	}
	return &loadedContract{c: c, doc: doc}, d.problems, nil
}

// ParseContract parses the bytes of the contract file contracts/<slug>.md.
// Errors are *ValidationError.
func ParseContract(data []byte, slug string) (*Contract, error) {
	if !ValidSlug(slug) {
		return nil, fmt.Errorf("%w: %q is not a slug", ErrInvalid, clip(slug))
	}
	lc, _, err := parseContractFile(data, slug)
	if err != nil {
		return nil, err
	}
	return lc.c, nil
}

func (w *Workspace) readContract(slug string) (*loadedContract, error) {
	if !ValidSlug(slug) {
		return nil, fmt.Errorf("%w: contract %q is not a slug (lowercase letters, digits and hyphens)", ErrInvalid, clip(slug))
	}
	data, err := readFile(w.path(ContractsDir, slug))
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("no contract %s: %w", rel(ContractsDir, slug), ErrNotFound)
		}
		return nil, err
	}
	lc, _, err := parseContractFile(data, slug)
	return lc, err
}

// contractSlug accepts a slug or a "contract:<slug>" id.
func contractSlug(s string) string { return strings.TrimPrefix(s, ContractIDPrefix) }

// Contract returns the contract with the given slug (or id).
func (w *Workspace) Contract(slug string) (*Contract, error) {
	lc, err := w.readContract(contractSlug(slug))
	if err != nil {
		return nil, err
	}
	return lc.c, nil
}

// Contracts returns every contract in the workspace, by slug.
func (w *Workspace) Contracts() ([]*Contract, error) {
	slugs, err := w.slugs(ContractsDir)
	if err != nil {
		return nil, err
	}
	out := make([]*Contract, 0, len(slugs))
	for _, slug := range slugs {
		lc, err := w.readContract(slug)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, lc.c)
	}
	return out, nil
}

// CreateContract writes a new contract in status draft. It refuses a slug
// that is taken (ErrExists) and criteria whose weights do not sum to 1.0.
func (w *Workspace) CreateContract(p ContractParams) (*Contract, error) {
	c, err := w.newContract(p)
	if err != nil {
		return nil, err
	}
	unlock, err := w.lock(ContractsDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := w.createLocked(c); err != nil {
		return nil, err
	}
	return c, nil
}

// newContract checks the parameters and builds the draft contract.
func (w *Workspace) newContract(p ContractParams) (*Contract, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	slug := p.Slug
	var link *Link
	if p.DelegationID != "" {
		if err := checkText(p.DelegationID, MaxIDLen, textLine); err != nil {
			return nil, bad("delegation ID: %v", err)
		}
		ls, err := LinkSlug(p.DelegationID)
		if err != nil {
			return nil, err
		}
		if slug != "" && slug != ls {
			return nil, bad("a contract linked to delegation %q is named %q, not %q", clip(p.DelegationID), ls, clip(slug))
		}
		slug = ls
		if err := checkText(p.TaskContractID, MaxIDLen, textLine); err != nil {
			return nil, bad("task contract ID: %v", err)
		}
		link = &Link{DelegationID: p.DelegationID, TaskContractID: p.TaskContractID}
	} else if p.TaskContractID != "" {
		return nil, bad("a task contract ID is given only with a delegation ID")
	}
	if !ValidSlug(slug) {
		return nil, bad("contract slug %q must be lowercase letters, digits and hyphens", clip(slug))
	}
	delegator, err := sourceDID(p.Delegator)
	if err != nil {
		return nil, bad("delegator %q is neither a principal ID nor a DID", clip(p.Delegator))
	}
	if p.Created.IsZero() {
		return nil, bad("the creation time is missing")
	}
	if p.Task.Description == "" {
		return nil, bad("the task needs a description")
	}
	if err := checkText(p.Task.Description, MaxTextLen, textBlock); err != nil {
		return nil, bad("task description: %v", err)
	}
	if err := checkText(p.Task.OutputFormat, MaxNameLen, textLine); err != nil {
		return nil, bad("output format: %v", err)
	}
	if p.Task.OutputSlug != "" && !ValidSlug(p.Task.OutputSlug) {
		return nil, bad("output slug %q must be lowercase letters, digits and hyphens", clip(p.Task.OutputSlug))
	}
	if p.Task.Domain != "" && !validName(p.Task.Domain) {
		return nil, bad("domain %q must be lowercase letters, digits and hyphens", clip(p.Task.Domain))
	}
	criteria := p.Criteria
	if criteria == nil {
		criteria = DefaultCriteria()
	}
	if len(criteria) > MaxCriteria {
		return nil, bad("more than %d criteria", MaxCriteria)
	}
	for name, wt := range criteria {
		if !validName(name) {
			return nil, bad("criterion %q must be lowercase letters, digits and hyphens", clip(name))
		}
		if !validScore(wt) {
			return nil, bad("the weight of %q is %v, outside [0, 1]", name, wt)
		}
	}
	if err := checkWeights(criteria); err != nil {
		return nil, err
	}
	if p.Scope != nil {
		for _, list := range [][]string{p.Scope.Include, p.Scope.Exclude} {
			for _, it := range list {
				if err := checkText(it, MaxTextLen, textBlock); err != nil {
					return nil, bad("scope: %v", err)
				}
			}
		}
	}
	if p.Constraints != nil && p.Constraints.ConfidenceThreshold != nil && !validScore(*p.Constraints.ConfidenceThreshold) {
		return nil, bad("the confidence threshold must be in [0, 1]")
	}
	delegate, delegateSlug, err := w.delegateProfileSlug(p.Delegate)
	if err != nil {
		return nil, err
	}
	c := &Contract{
		Slug: slug, Status: Draft,
		Delegator: delegator, Delegate: delegate, DelegateSlug: delegateSlug,
		Created: truncate(p.Created), Task: p.Task, Scope: p.Scope, Constraints: p.Constraints,
		Criteria: criteria, Link: link,
	}
	if !p.Deadline.IsZero() {
		c.Deadline = truncate(p.Deadline)
	}
	return c, nil
}

// delegateProfileSlug returns the delegate's DID and the slug of its
// profile: the existing one, or the one Record would create.
func (w *Workspace) delegateProfileSlug(agent string) (did, slug string, err error) {
	if agent == "" {
		return "", "", fmt.Errorf("%w: the delegate is missing", ErrInvalid)
	}
	ref, err := parseAgent(agent)
	if err != nil {
		return "", "", err
	}
	if ref.did == "" {
		return "", "", fmt.Errorf("%w: give the delegate as a principal ID or DID, not a slug", ErrInvalid)
	}
	lp, err := w.findProfile(ref, w.loadProfile)
	switch {
	case err == nil:
		return ref.did, lp.p.Slug, nil
	case errors.Is(err, ErrNotFound) && ref.ed:
		return ref.did, ref.slug, nil
	case errors.Is(err, ErrNotFound):
		return "", "", fmt.Errorf("%w: %s has no profile in this workspace, and profiles are created only for Ed25519 agents", ErrUnsupportedAgent, ref.did)
	}
	return "", "", err
}

// createLocked writes a new contract file; the caller holds the lock.
func (w *Workspace) createLocked(c *Contract) error {
	_, err := readFile(w.path(ContractsDir, c.Slug))
	switch {
	case err == nil:
		return fmt.Errorf("%s: %w", rel(ContractsDir, c.Slug), ErrExists)
	case !errors.Is(err, ErrNotFound):
		return err
	}
	data, err := newContractDocument(c, contractBody(c)).encode()
	if err != nil {
		return err
	}
	return writeFile(w.path(ContractsDir, c.Slug), data)
}

// Activate moves a draft contract to active: the delegate took it on.
func (w *Workspace) Activate(slug string) (*Contract, error) { return w.advance(slug, Active) }

// Complete moves an active contract to completed: the delegate says the
// work is done.
func (w *Workspace) Complete(slug string) (*Contract, error) { return w.advance(slug, Completed) }

func (w *Workspace) advance(slug string, to Status) (*Contract, error) {
	unlock, err := w.lock(ContractsDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	lc, err := w.readContract(contractSlug(slug))
	if err != nil {
		return nil, err
	}
	if err := step(lc.c, to); err != nil {
		return nil, err
	}
	setStatus(lc.doc, lc.c)
	data, err := lc.doc.encode()
	if err != nil {
		return nil, err
	}
	if err := writeFile(w.path(ContractsDir, lc.c.Slug), data); err != nil {
		return nil, err
	}
	return lc.c, nil
}

// step moves c one step along its lifecycle to status to, or refuses.
func step(c *Contract, to Status) error {
	if next[c.Status] != to {
		return &TransitionError{Contract: c.ID(), From: c.Status, To: to}
	}
	c.Status = to
	return nil
}
