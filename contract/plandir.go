package contract

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/delegateos/delegateos/internal/fsutil"
)

// PlanDir is the directory of a workspace where decompose records signed
// plans (one file per plan, named by its ID) and the gate finds them. A
// plan is never replaced by a different one.
type PlanDir struct {
	dir string

	mu sync.Mutex
	// loaded holds every plan file read so far by name; plans are
	// immutable, so each file is read once.
	loaded map[string]*Plan
	bad    map[string]bool
	bySub  map[string][]PlanRef
	byPar  map[string][]*Plan
	// tampered maps the delegation keys a plan file that reads but does
	// not verify names (as sub-task or parent) to why it does not.
	tampered map[string]string
}

// PlanRef is a sub-task of a recorded plan.
type PlanRef struct {
	Plan    *Plan
	SubTask *SubTask
}

// OpenPlanDir opens (creating it if need be) a plan directory.
func OpenPlanDir(dir string) (*PlanDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &PlanDir{dir: dir, loaded: map[string]*Plan{}, bad: map[string]bool{}, bySub: map[string][]PlanRef{}, byPar: map[string][]*Plan{}, tampered: map[string]string{}}, nil
}

// Put verifies and records a plan. A plan recorded already with the same
// content is no error; with other content it is.
func (d *PlanDir) Put(p *Plan) error {
	if err := p.Verify(); err != nil {
		return err
	}
	b, err := p.Marshal()
	if err != nil {
		return err
	}
	path := filepath.Join(d.dir, p.ID+".json")
	if held, err := os.ReadFile(path); err == nil {
		if bytes.Equal(bytes.TrimSpace(held), b) {
			return nil
		}
		return planErr("a different plan %s is recorded in %s already", p.ID, d.dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fsutil.WriteFileAtomic(path, append(b, '\n'), 0o644)
}

// Get returns the recorded plan with the ID, verified.
func (d *PlanDir) Get(id string) (*Plan, error) {
	if !ValidPlanID(id) {
		return nil, planErr("%q is not a plan ID", clip(id))
	}
	if err := d.refresh(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if p := d.loaded[id+".json"]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("plan %s: %w", id, fs.ErrNotExist)
}

// List returns every recorded plan that verifies.
func (d *PlanDir) List() ([]*Plan, error) {
	if err := d.refresh(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*Plan
	for _, p := range d.loaded {
		out = append(out, p)
	}
	return out, nil
}

// SubTaskOf returns the recorded plans that made the delegation with the
// key as one of their sub-tasks. Only plans that verify are indexed; which
// of them bind the delegation is for the caller to decide from the chain
// (the plan's issuer must have signed the delegation's block).
func (d *PlanDir) SubTaskOf(key string) ([]PlanRef, error) {
	if err := d.refresh(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]PlanRef{}, d.bySub[key]...), nil
}

// Tampered says why a plan file naming the delegation with the key does
// not verify; "" when none does.
func (d *PlanDir) Tampered(key string) (string, error) {
	if err := d.refresh(); err != nil {
		return "", err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.tampered[key], nil
}

// SplitOf returns the recorded plans that split the delegation with the key.
func (d *PlanDir) SplitOf(key string) ([]*Plan, error) {
	if err := d.refresh(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*Plan{}, d.byPar[key]...), nil
}

// refresh reads the plan files added since the last look. A file that is
// not a verified plan is skipped (and never indexed): the index only ever
// adds refusals, and only for delegations a plan's signer made.
func (d *PlanDir) refresh() error {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return fmt.Errorf("the plans in %s cannot be read: %w", d.dir, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") || !ValidPlanID(strings.TrimSuffix(name, ".json")) || d.loaded[name] != nil || d.bad[name] {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d.dir, name))
		if err != nil {
			return fmt.Errorf("plan %s cannot be read: %w", name, err)
		}
		p, err := ParsePlan(b)
		if err != nil {
			d.bad[name] = true
			continue
		}
		if err := p.Verify(); err != nil || p.ID+".json" != name {
			// Its claims cannot be trusted to lift anything, but they can
			// be to refuse: the delegations it names stay refused.
			why := fmt.Sprintf("plan file %s does not verify", name)
			if err != nil {
				why += ": " + err.Error()
			}
			d.bad[name] = true
			d.tampered[p.ParentDelegationKey] = why
			for _, st := range p.SubTasks {
				d.tampered[st.DelegationKey] = why
			}
			continue
		}
		d.loaded[name] = p
		d.byPar[p.ParentDelegationKey] = append(d.byPar[p.ParentDelegationKey], p)
		for i := range p.SubTasks {
			st := &p.SubTasks[i]
			d.bySub[st.DelegationKey] = append(d.bySub[st.DelegationKey], PlanRef{Plan: p, SubTask: st})
		}
	}
	return nil
}
