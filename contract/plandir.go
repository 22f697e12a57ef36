package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/delegateos/delegateos/internal/fsutil"
)

// PlanDir is the directory of a workspace where decompose records signed
// plans (one file per plan, named by its ID) and the gate finds them. A
// plan is never replaced by a different one.
type PlanDir struct {
	dir string
	// Warn, when set, is told of each plan-named entry that cannot be
	// read, once per entry.
	Warn func(msg string)

	mu sync.Mutex
	// seen holds every plan file name read so far: plans are immutable,
	// so each file is read once.
	seen map[string]bool
	// idx is the index of what was read; it is replaced, never changed,
	// so a PlanView keeps a consistent one.
	idx *planIndex
	// listed is the directory as it was when last listed (nil: list at
	// the next look), and listedAt when: a look lists the directory again
	// only when it changed (a plan added, removed or renamed changes its
	// modification time or size), after a Put here, or once maxListAge
	// has passed (a bound on staleness where timestamps are coarse).
	listed   fs.FileInfo
	listedAt time.Time
	// lists counts the listings (for tests).
	lists int
}

// maxListAge bounds how long a look trusts an unchanged directory.
const maxListAge = 2 * time.Second

type planIndex struct {
	byID  map[string]*Plan
	bySub map[string][]PlanRef
	byPar map[string][]*Plan
	// tampered maps the delegation keys a plan file that reads but does
	// not verify names (as sub-task or parent) to why it does not.
	tampered map[string]string
	// bound maps each delegation key a recorded plan covers (its parent
	// and sub-tasks, from the bindings file, which outlives the plan's
	// file) to the IDs of the plans covering it, space-separated.
	bound map[string]string
	// unreadable maps the plan-named entries that could not be read at
	// the last look to why: a plan may be behind any of them.
	unreadable map[string]string
}

// PlanRef is a sub-task of a recorded plan.
type PlanRef struct {
	Plan    *Plan
	SubTask *SubTask
}

// PlanView is the recorded plans as one look at the directory found
// them.
type PlanView struct{ idx *planIndex }

// OpenPlanDir opens (creating it if need be) a plan directory.
func OpenPlanDir(dir string) (*PlanDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &PlanDir{dir: dir, seen: map[string]bool{}, idx: &planIndex{byID: map[string]*Plan{},
		bySub: map[string][]PlanRef{}, byPar: map[string][]*Plan{}, tampered: map[string]string{}, bound: map[string]string{}}}, nil
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
	// The binding first: a plan whose file is lost or damaged later (or
	// by a crash right after this) keeps the delegations it covers
	// refused rather than freed.
	if err := d.bind(p); err != nil {
		return err
	}
	err = fsutil.WriteFileAtomic(path, append(b, '\n'), 0o644)
	d.mu.Lock()
	d.listed = nil // seen at the next look, whatever the timestamps say
	d.mu.Unlock()
	return err
}

// View looks at the directory once, reading the plan files added since
// the last look, and returns what it holds.
func (d *PlanDir) View() (PlanView, error) {
	if err := d.refresh(); err != nil {
		return PlanView{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return PlanView{d.idx}, nil
}

// Get returns the recorded plan with the ID, verified.
func (d *PlanDir) Get(id string) (*Plan, error) {
	if !ValidPlanID(id) {
		return nil, planErr("%q is not a plan ID", clip(id))
	}
	v, err := d.View()
	if err != nil {
		return nil, err
	}
	if p := v.idx.byID[id]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("plan %s: %w", id, fs.ErrNotExist)
}

// SubTaskOf is View().SubTaskOf.
func (d *PlanDir) SubTaskOf(key string) ([]PlanRef, error) {
	v, err := d.View()
	return v.SubTaskOf(key), err
}

// SplitOf is View().SplitOf.
func (d *PlanDir) SplitOf(key string) ([]*Plan, error) {
	v, err := d.View()
	return v.SplitOf(key), err
}

// SubTaskOf returns the plans that made the delegation with the key as one
// of their sub-tasks. Only plans that verify are indexed; which of them
// bind the delegation is for the caller to decide from the chain (the
// plan's issuer must have signed the delegation's block).
func (v PlanView) SubTaskOf(key string) []PlanRef {
	if v.idx == nil {
		return nil
	}
	return v.idx.bySub[key]
}

// SplitOf returns the plans that split the delegation with the key.
func (v PlanView) SplitOf(key string) []*Plan {
	if v.idx == nil {
		return nil
	}
	return v.idx.byPar[key]
}

// Unreadable says why a plan-named entry of the directory could not be
// read at the last look (a plan may be behind it, covering delegations
// no other plan names); "" when every entry could.
func (v PlanView) Unreadable() string {
	if v.idx == nil || len(v.idx.unreadable) == 0 {
		return ""
	}
	names := slices.Sorted(maps.Keys(v.idx.unreadable))
	return v.idx.unreadable[names[0]]
}

// Missing says why the delegation with the key, which a recorded plan
// covers (bindings file), is not covered by that plan as it reads now:
// its file is missing, does not parse or does not verify. "" otherwise.
func (v PlanView) Missing(key string) string {
	if v.idx == nil {
		return ""
	}
	for _, id := range strings.Fields(v.idx.bound[key]) {
		if v.idx.byID[id] == nil {
			return fmt.Sprintf("plan %s, recorded as covering it, is missing or does not verify", id)
		}
	}
	return ""
}

// Tampered says why a plan file naming the delegation with the key does
// not verify; "" when none does.
func (v PlanView) Tampered(key string) string {
	if v.idx == nil {
		return ""
	}
	return v.idx.tampered[key]
}

// refresh reads the plan files added since the last look. A file that is
// not a verified plan is never indexed as one: the index only ever adds
// refusals, and only for delegations a plan's signer made. One that reads
// but does not verify keeps the delegations it names refused.
func (d *PlanDir) refresh() error {
	st, err := os.Stat(d.dir)
	if err != nil {
		return fmt.Errorf("the plans in %s cannot be read: %w", d.dir, err)
	}
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.listed != nil && sameDir(d.listed, st) && now.Sub(d.listedAt) < maxListAge && now.After(d.listedAt) {
		return nil
	}
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return fmt.Errorf("the plans in %s cannot be read: %w", d.dir, err)
	}
	d.lists++
	d.listed, d.listedAt = st, now
	var next *planIndex
	unreadable := map[string]string{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") || !ValidPlanID(strings.TrimSuffix(name, ".json")) || d.seen[name] {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d.dir, name))
		if err != nil {
			// Not marked seen: it is read again at the next look. Only
			// the delegations a plan could cover wait for it (the caller
			// decides which), not every token.
			why := fmt.Sprintf("plan file %s cannot be read: %v", name, err)
			if _, known := d.idx.unreadable[name]; !known && d.Warn != nil {
				d.Warn(why)
			}
			unreadable[name] = why
			continue
		}
		d.seen[name] = true
		p, err := ParsePlan(b)
		if err != nil {
			continue
		}
		if next == nil {
			next = d.idx.clone()
		}
		if err := p.Verify(); err != nil || p.ID+".json" != name {
			why := fmt.Sprintf("plan file %s does not verify", name)
			if err != nil {
				why += ": " + err.Error()
			}
			next.tampered[p.ParentDelegationKey] = why
			for _, st := range p.SubTasks {
				next.tampered[st.DelegationKey] = why
			}
			continue
		}
		next.byID[p.ID] = p
		next.byPar[p.ParentDelegationKey] = append(next.byPar[p.ParentDelegationKey], p)
		for i := range p.SubTasks {
			st := &p.SubTasks[i]
			next.bySub[st.DelegationKey] = append(next.bySub[st.DelegationKey], PlanRef{Plan: p, SubTask: st})
		}
	}
	bound, err := d.readBindings()
	if err != nil {
		why := fmt.Sprintf("the plan bindings %s cannot be read: %v", bindingsFile, err)
		if _, known := d.idx.unreadable[bindingsFile]; !known && d.Warn != nil {
			d.Warn(why)
		}
		unreadable[bindingsFile] = why
		bound = d.idx.bound
	} else {
		// Plans recorded before bindings existed (or by an older
		// version) are bound now, so later damage to them refuses.
		idx := d.idx
		if next != nil {
			idx = next
		}
		for _, id := range slices.Sorted(maps.Keys(idx.byID)) {
			p := idx.byID[id]
			if slices.Contains(strings.Fields(bound[p.ParentDelegationKey]), id) {
				continue
			}
			if err := d.bind(p); err != nil && d.Warn != nil {
				d.Warn(fmt.Sprintf("plan %s cannot be bound in %s: %v", id, bindingsFile, err))
			}
			addBound(bound, p.ParentDelegationKey, id)
			for _, st := range p.SubTasks {
				addBound(bound, st.DelegationKey, id)
			}
		}
	}
	if !maps.Equal(bound, d.idx.bound) {
		if next == nil {
			next = d.idx.clone()
		}
		next.bound = bound
	}
	if !maps.Equal(unreadable, d.idx.unreadable) {
		if next == nil {
			next = d.idx.clone()
		}
		next.unreadable = unreadable
	}
	if next != nil {
		d.idx = next
	}
	return nil
}

// bindingsFile is the append-only record, in the plan directory, of the
// delegation keys each recorded plan covers: one JSON object a line.
const bindingsFile = "bindings.jsonl"

type binding struct {
	Plan string   `json:"plan"`
	Keys []string `json:"keys"`
}

// bind appends the delegations a plan covers to the bindings file.
func (d *PlanDir) bind(p *Plan) error {
	keys := []string{p.ParentDelegationKey}
	for _, st := range p.SubTasks {
		keys = append(keys, st.DelegationKey)
	}
	line, err := json.Marshal(binding{Plan: p.ID, Keys: keys})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(d.dir, bindingsFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readBindings reads the bindings file: key → plan ID. A line that does
// not parse (a torn write) makes the whole file count as unreadable.
func (d *PlanDir) readBindings() (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(d.dir, bindingsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var bd binding
		if err := json.Unmarshal(line, &bd); err != nil || !ValidPlanID(bd.Plan) {
			return nil, fmt.Errorf("line %d does not parse", i+1)
		}
		for _, k := range bd.Keys {
			addBound(out, k, bd.Plan)
		}
	}
	return out, nil
}

// addBound records that the plan with the ID covers the key.
func addBound(m map[string]string, key, id string) {
	ids := strings.Fields(m[key])
	if !slices.Contains(ids, id) {
		m[key] = strings.Join(append(ids, id), " ")
	}
}

// sameDir reports whether two looks at a directory found it unchanged.
func sameDir(a, b fs.FileInfo) bool {
	return a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size() && os.SameFile(a, b)
}

// clone copies the index; its slices are copied as they are appended to.
func (x *planIndex) clone() *planIndex {
	c := &planIndex{byID: maps.Clone(x.byID), bySub: maps.Clone(x.bySub), byPar: maps.Clone(x.byPar), tampered: maps.Clone(x.tampered), unreadable: x.unreadable, bound: x.bound}
	for k, v := range c.bySub {
		c.bySub[k] = v[:len(v):len(v)]
	}
	for k, v := range c.byPar {
		c.byPar[k] = v[:len(v):len(v)]
	}
	return c
}
