package main

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/render"
	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/policy"
)

// A spend store and a chain log are files an operator points at, written
// by a proxy that anyone holding a token can make record any delegation ID:
// every string from them is shown through render.Printable (text, tree)
// or render.MermaidText (mermaid), so none can forge a line, a column or
// a diagram element.

var spendCmd = &command{
	name:    "spend",
	args:    "[--policy FILE | --store FILE] [--workspace DIR] [--format text|tree|mermaid|json] [--json] [--name NAME=ID]...",
	summary: "show where the money went: each delegation's budget, committed and reserved spend, remaining budget, calls and last call",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		policyPath := fs.String("policy", "", "the proxy's policy file: its spend_store is read, and its workspace names the delegations")
		store := fs.String("store", "", "the spend store file (or the redis:// URL of a fleet's store), instead of --policy")
		ws := fs.String("workspace", "", "the workspace whose "+wsDelegations+" names the delegations (default: the policy's workspace)")
		format := fs.String("format", "text", "text (a table), tree (sub-delegations under their parents), mermaid (a graph TD diagram for docs) or json")
		asJSON := fs.Bool("json", false, "the same as --format json")
		names := fs.StringArray("name", nil, "show principal ID (or did:key) ID as NAME (repeatable), e.g. --name alice=did:key:z6Mk...")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if *asJSON {
				if fs.Changed("format") && *format != "json" {
					return usagef("--json is --format json; give one of them")
				}
				*format = "json"
			}
			switch *format {
			case "text", "tree", "mermaid", "json":
			default:
				return usagef("--format must be text, tree, mermaid or json")
			}
			label, err := principalNames(*names)
			if err != nil {
				return err
			}
			path, workspace := *store, *ws
			switch {
			case (*policyPath == "") == (*store == ""):
				return usagef("give the policy (--policy FILE) or the spend store (--store FILE), one of them")
			case *policyPath != "":
				pol, err := policy.Load(*policyPath)
				if err != nil {
					return policyLoadError(*policyPath, err)
				}
				if pol.SpendStore == "" {
					return fixf("the policy %s sets no spend_store, so its proxy keeps spend in memory only and there is nothing to show; set spend_store (or give the proxy's --spend-store FILE as --store FILE)", *policyPath)
				}
				path = pol.SpendStore
				if workspace == "" {
					workspace = pol.Workspace
				}
			}
			usage, err := budget.ReadUsage(path)
			if errors.Is(err, iofs.ErrNotExist) {
				return inputf("the spend store %s does not exist: no proxy has opened it yet (the proxy creates it at its start), or the path is wrong", path)
			}
			if err != nil {
				return inputf("%v", err)
			}
			var ds []chain.Delegation
			if workspace != "" {
				log := filepath.Join(workspace, wsDelegations)
				ds, err = chain.Load(log)
				if err != nil && !errors.Is(err, iofs.ErrNotExist) {
					fmt.Fprintf(e.stderr, "delegateos spend: the delegations are shown without names: %s\n", oneLine(err.Error()))
				}
			}
			rep := newSpendReport(redactStore(path), usage, ds)
			if workspace != "" {
				if err := rep.attachPlans(filepath.Join(workspace, wsPlans)); err != nil {
					fmt.Fprintf(e.stderr, "delegateos spend: the decomposition plans are not shown: %s\n", oneLine(err.Error()))
				}
			}
			switch *format {
			case "json":
				return writeJSON(e, rep.json())
			case "tree":
				rep.writeTree(e.stdout, label)
			case "mermaid":
				_, err := io.WriteString(e.stdout, rep.mermaid(label))
				return err
			default:
				rep.writeTable(e.stdout, label)
			}
			return nil
		}
	},
}

// spendReport is a spend store's usage, one node per key, arranged as a
// forest of delegations.
type spendReport struct {
	store string
	nodes []*spendNode // in key order
	roots []*spendNode // in key order
}

// spendNode is one key of the store.
type spendNode struct {
	u budget.Usage
	// parsed reports whether the key is one the gate writes; then issuer
	// and ids are what it names. A key that is not is shown as it is.
	parsed bool
	issuer string
	ids    []string
	// shown is how many of ids, from the end, the tree shows: one, or more
	// when the node's parent in the tree is an ancestor further up (the
	// store has no key for the delegations between).
	shown    int
	record   *chain.Delegation // the chain's record of the delegation, if the chain has it
	children []*spendNode
	// splits are the recorded plans that split the delegation (signed by
	// its delegatee); sub the plan sub-task the delegation is, if any.
	splits []*contract.Plan
	sub    *contract.PlanRef
}

func newSpendReport(store string, usage []budget.Usage, ds []chain.Delegation) *spendReport {
	rep := &spendReport{store: store}
	byKey := make(map[string]*spendNode, len(usage))
	for _, u := range usage {
		n := &spendNode{u: u, shown: 1}
		n.issuer, n.ids, n.parsed = gate.ParseBudgetKey(u.Key)
		byKey[u.Key] = n
		rep.nodes = append(rep.nodes, n)
	}
	records := chainIndex(ds)
	for _, n := range rep.nodes {
		if !n.parsed {
			rep.roots = append(rep.roots, n)
			continue
		}
		n.record = chainRecord(records, n.issuer, n.ids)
		var parent *spendNode
		key := n.u.Key
		for up := len(n.ids) - 1; up > 0 && parent == nil; up-- {
			key = key[:len(key)-len(keySegment(n.ids[up]))]
			parent = byKey[key]
			n.shown = len(n.ids) - up
		}
		if parent == nil {
			n.shown = len(n.ids)
			rep.roots = append(rep.roots, n)
		} else {
			parent.children = append(parent.children, n)
		}
	}
	return rep
}

// attachPlans marks the delegations that recorded plans split and the
// sub-tasks they delegated. Only plans that verify are read, and a plan
// counts only for a delegation its issuer holds.
func (rep *spendReport) attachPlans(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, iofs.ErrNotExist) {
		return nil
	}
	plans, err := contract.OpenPlanDir(dir)
	if err != nil {
		return err
	}
	for _, n := range rep.nodes {
		if n.record == nil || n.record.Key == "" {
			continue
		}
		split, err := plans.SplitOf(n.record.Key)
		if err != nil {
			return err
		}
		for _, p := range split {
			if p.Issuer == n.record.To {
				n.splits = append(n.splits, p)
			}
		}
		refs, err := plans.SubTaskOf(n.record.Key)
		if err != nil {
			return err
		}
		for _, r := range refs {
			if r.Plan.Issuer == n.record.From && r.Plan.ParentDelegationKey == n.record.ParentKey {
				n.sub = &r
			}
		}
	}
	return nil
}

// allotment is a sub-task's budget figures: what the plan allotted, and
// what returned to the parent (the unspent allotment, once it ended).
func (n *spendNode) allotment() (allotted, returned int64) {
	allotted = n.sub.SubTask.BudgetMicrocents
	if n.record.Status != chain.StatusActive {
		returned = max(0, allotted-n.u.Committed-n.u.Reserved)
	}
	return allotted, returned
}

// planText describes the plans a delegation is split by, and the sub-task
// it is, for the tree.
func (n *spendNode) planText(esc func(string) string) string {
	var b strings.Builder
	for _, p := range n.splits {
		var sum int64
		for _, st := range p.SubTasks {
			sum += st.BudgetMicrocents
		}
		fmt.Fprintf(&b, "  plan %s (%s, %d sub-tasks, allotted %d)", esc(p.ID), esc(p.Strategy), len(p.SubTasks), sum)
	}
	if n.sub != nil {
		allotted, returned := n.allotment()
		fmt.Fprintf(&b, "  sub-task %s of plan %s  allotted %d  reserved %d  spent %d  returned %d",
			esc(strconv.Quote(n.sub.SubTask.ID)), esc(n.sub.Plan.ID), allotted, n.u.Reserved, n.u.Committed, returned)
	}
	return b.String()
}

// keySegment is what a delegation ID adds to a budget key.
func keySegment(id string) string { return "/" + strconv.Itoa(len(id)) + ":" + id }

// chainRecords indexes a chain's records by ID (several delegations may
// share one) and by key.
type chainRecords struct {
	byID  map[string][]*chain.Delegation
	byKey map[string]*chain.Delegation
}

func chainIndex(ds []chain.Delegation) chainRecords {
	r := chainRecords{byID: map[string][]*chain.Delegation{}, byKey: map[string]*chain.Delegation{}}
	for i := range ds {
		r.byID[ds[i].ID] = append(r.byID[ds[i].ID], &ds[i])
		self, _ := recordLinks(&ds[i])
		if _, dup := r.byKey[self]; !dup {
			r.byKey[self] = &ds[i]
		}
	}
	return r
}

// recordLinks names a record and its parent: by key, or by ID for a
// record that has no key (not read from a chain store).
func recordLinks(d *chain.Delegation) (self, parent string) {
	if d.Key != "" {
		return "k" + d.Key, "k" + d.ParentKey
	}
	return "i" + d.ID, "i" + d.ParentID
}

// chainRecord returns the chain's record of the last of ids if the chain
// records exactly one delegation with that path: each parent (by key) the
// next ID up, and at the top a root delegation issued by issuer. A
// delegation ID alone could name a delegation of another chain; two with
// the same path (an issuer or delegator that reused an ID) share the budget
// key, and neither is named.
func chainRecord(records chainRecords, issuer string, ids []string) *chain.Delegation {
	var found *chain.Delegation
	for _, d := range records.byID[ids[len(ids)-1]] {
		if onPath(records, d, issuer, ids) {
			if found != nil {
				return nil
			}
			found = d
		}
	}
	return found
}

func onPath(records chainRecords, d *chain.Delegation, issuer string, ids []string) bool {
	for i := len(ids) - 1; i >= 0; i-- {
		switch {
		case d == nil || d.ID != ids[i]:
			return false
		case i == 0:
			return d.IsRoot() && d.From == issuer
		}
		_, up := recordLinks(d)
		d = records.byKey[up]
	}
	return false
}

// The figures of a node as text; "-" where the store does not record them.
func (n *spendNode) budgetText() string {
	if !n.u.Recorded {
		return "-"
	}
	return strconv.FormatInt(n.u.Limit, 10)
}

func (n *spendNode) remainingText() string {
	if !n.u.Recorded {
		return "-"
	}
	return strconv.FormatInt(n.u.Limit-n.u.Committed-n.u.Reserved, 10)
}

func (n *spendNode) callsText() string {
	if !n.u.Recorded {
		return "-"
	}
	return strconv.FormatInt(n.u.Calls, 10)
}

func (n *spendNode) lastCallText() string {
	if !n.u.Recorded {
		return "-"
	}
	return timestamp.Format(n.u.LastCall)
}

// name is the delegation as the tree shows it, escaped by esc: its ID, or
// the IDs down from its parent in the tree, or the key when it is not one
// the gate writes.
func (n *spendNode) name(esc func(string) string) string {
	if !n.parsed {
		return esc(n.u.Key)
	}
	return idPath(n.ids[len(n.ids)-n.shown:], esc)
}

// idPath writes delegation IDs as a path, each escaped on its own; an ID
// that holds a '/' is Go-quoted, so that the path reads one way.
func idPath(ids []string, esc func(string) string) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		if strings.Contains(id, "/") {
			id = strconv.Quote(id)
		}
		parts[i] = esc(id)
	}
	return strings.Join(parts, esc("/"))
}

// who is who delegated to whom, as the chain records it, or, for a root
// the chain does not know, the issuer; "" if neither is known. Each name
// is escaped by esc on its own.
func (n *spendNode) who(label func(string) string, esc func(string) string) string {
	switch {
	case n.record != nil:
		return esc(label(n.record.From)) + esc(" → ") + esc(label(n.record.To))
	case n.parsed && len(n.ids) == 1:
		return esc("from ") + esc(label(n.issuer))
	}
	return ""
}

// writeTable is the text format: one row per delegation, in key order.
func (rep *spendReport) writeTable(w io.Writer, label func(string) string) {
	p := render.Printable
	fmt.Fprintf(w, "spend store %s\n", p(rep.store))
	if len(rep.nodes) == 0 {
		fmt.Fprintln(w, "no spend recorded")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DELEGATION\tWHO\tBUDGET\tCOMMITTED\tRESERVED\tREMAINING\tCALLS\tLAST CALL")
	for _, n := range rep.nodes {
		name := p(n.u.Key)
		if n.parsed {
			name = idPath(n.ids, p)
		}
		who := n.who(label, p)
		if who == "" {
			who = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", name, who, n.budgetText(), n.u.Committed, n.u.Reserved,
			n.remainingText(), n.callsText(), n.lastCallText())
	}
	tw.Flush()
}

// writeTree is the tree format: each delegation under its parent, with
// its figures on its line.
//
//	del_a11ce0000001  root → alice  [active]  budget 1000000  committed 2000  reserved 0  remaining 998000  calls 2  last call 2026-01-01T00:00:00.000Z
//	└─ del_b0b000000001  alice → bob  [completed]  budget 50000  ...
func (rep *spendReport) writeTree(w io.Writer, label func(string) string) {
	p := render.Printable
	fmt.Fprintf(w, "spend store %s\n", p(rep.store))
	if len(rep.nodes) == 0 {
		fmt.Fprintln(w, "no spend recorded")
		return
	}
	var walk func(n *spendNode, lead, branch string)
	walk = func(n *spendNode, lead, branch string) {
		var b strings.Builder
		b.WriteString(lead + branch + n.name(p))
		if who := n.who(label, p); who != "" {
			b.WriteString("  " + who)
		}
		if n.record != nil {
			b.WriteString("  [" + p(string(n.record.Status)) + "]")
		}
		b.WriteString(n.planText(p))
		fmt.Fprintf(&b, "  budget %s  committed %d  reserved %d  remaining %s  calls %s  last call %s",
			n.budgetText(), n.u.Committed, n.u.Reserved, n.remainingText(), n.callsText(), n.lastCallText())
		fmt.Fprintln(w, b.String())
		switch branch {
		case "├─ ":
			lead += "│  "
		case "└─ ":
			lead += "   "
		}
		for i, c := range n.children {
			next := "├─ "
			if i == len(n.children)-1 {
				next = "└─ "
			}
			walk(c, lead, next)
		}
	}
	for _, r := range rep.roots {
		walk(r, "", "")
	}
}

// mermaid is the mermaid format: a graph TD with a node per delegation,
// labelled with its figures, and an edge from each to the delegations
// under it. Node names are generated (s0, s1, ...); every label is written
// by render.MermaidText.
func (rep *spendReport) mermaid(label func(string) string) string {
	m := render.MermaidText
	var b strings.Builder
	b.WriteString("graph TD\n")
	next := 0
	var walk func(n *spendNode) string
	walk = func(n *spendNode) string {
		id := "s" + strconv.Itoa(next)
		next++
		b.WriteString("  " + id + `["` + n.name(m))
		if who := n.who(label, m); who != "" {
			b.WriteString("<br/>" + who)
		}
		if n.record != nil {
			b.WriteString(" #183; " + m(string(n.record.Status)))
		}
		if pt := strings.TrimSpace(n.planText(m)); pt != "" {
			b.WriteString("<br/>" + pt)
		}
		b.WriteString("<br/>budget " + m(n.budgetText()) + " #183; committed " + m(strconv.FormatInt(n.u.Committed, 10)) +
			" #183; reserved " + m(strconv.FormatInt(n.u.Reserved, 10)))
		b.WriteString("<br/>remaining " + m(n.remainingText()) + " #183; calls " + m(n.callsText()) +
			" #183; last call " + m(n.lastCallText()) + "\"]\n")
		for _, c := range n.children {
			b.WriteString("  " + id + " --> " + walk(c) + "\n")
		}
		return id
	}
	for _, r := range rep.roots {
		walk(r)
	}
	return b.String()
}

// spendJSON is the json format.
type spendJSON struct {
	Store       string           `json:"store"`
	Delegations []spendEntryJSON `json:"delegations"`
}

// spendEntryJSON is one key of the store. Budget, Remaining, Calls and
// LastCall are null when the store does not record them (a store written
// before calls were recorded); From, To, ContractID and Status are there
// when the workspace's chain records the delegation.
type spendEntryJSON struct {
	Key string `json:"key"`
	// Issuer and Path (the delegation IDs from the root down) are what the
	// key names, when it is a key the gate writes; Parent is the key of the
	// delegation the tree shows it under.
	Issuer     string   `json:"issuer,omitempty"`
	Path       []string `json:"path,omitempty"`
	Parent     string   `json:"parent,omitempty"`
	Budget     *int64   `json:"budget"`
	Committed  int64    `json:"committed"`
	Reserved   int64    `json:"reserved"`
	Remaining  *int64   `json:"remaining"`
	Calls      *int64   `json:"calls"`
	LastCall   *string  `json:"lastCall"`
	From       string   `json:"from,omitempty"`
	To         string   `json:"to,omitempty"`
	ContractID string   `json:"contractId,omitempty"`
	Status     string   `json:"status,omitempty"`
	// Plans are the IDs of the decomposition plans that split the
	// delegation; SubTask is set when it is a plan's sub-task.
	Plans   []string      `json:"plans,omitempty"`
	SubTask *subTaskSpend `json:"subTask,omitempty"`
}

// subTaskSpend is a sub-task's allotment and what became of it.
type subTaskSpend struct {
	Plan      string   `json:"plan"`
	ID        string   `json:"id"`
	Allotted  int64    `json:"allotted"`
	Reserved  int64    `json:"reserved"`
	Spent     int64    `json:"spent"`
	Returned  int64    `json:"returned"`
	DependsOn []string `json:"dependsOn"`
}

func (rep *spendReport) json() spendJSON {
	out := spendJSON{Store: rep.store, Delegations: []spendEntryJSON{}}
	parents := map[*spendNode]string{}
	for _, n := range rep.nodes {
		for _, c := range n.children {
			parents[c] = n.u.Key
		}
	}
	for _, n := range rep.nodes {
		e := spendEntryJSON{Key: n.u.Key, Parent: parents[n], Committed: n.u.Committed, Reserved: n.u.Reserved}
		if n.parsed {
			e.Issuer, e.Path = n.issuer, n.ids
		}
		if n.u.Recorded {
			limit, remaining, calls, last := n.u.Limit, n.u.Limit-n.u.Committed-n.u.Reserved, n.u.Calls, timestamp.Format(n.u.LastCall)
			e.Budget, e.Remaining, e.Calls, e.LastCall = &limit, &remaining, &calls, &last
		}
		if d := n.record; d != nil {
			e.From, e.To, e.ContractID, e.Status = d.From, d.To, d.ContractID, string(d.Status)
		}
		for _, p := range n.splits {
			e.Plans = append(e.Plans, p.ID)
		}
		if n.sub != nil {
			allotted, returned := n.allotment()
			e.SubTask = &subTaskSpend{Plan: n.sub.Plan.ID, ID: n.sub.SubTask.ID, Allotted: allotted, Reserved: n.u.Reserved,
				Spent: n.u.Committed, Returned: returned, DependsOn: n.sub.SubTask.DependsOn}
		}
		out.Delegations = append(out.Delegations, e)
	}
	return out
}
