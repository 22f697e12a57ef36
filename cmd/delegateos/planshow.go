package main

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/render"
)

var contractShowCmd = &command{
	name:    "show",
	args:    "--plan PLAN [--workspace DIR] [--spend-store FILE|URL] [--format mermaid|text|json] [--name NAME=ID]...",
	summary: "draw a decomposition plan's DAG (Mermaid) with each sub-task's status, assignee and spend",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		planArg := fs.String("plan", "", "the plan: its ID (plan_…, read from the workspace's "+wsPlans+"/) or a signed plan file")
		ws := fs.String("workspace", ".", "the workspace whose "+wsDelegations+" says where each sub-task stands")
		spendStore := fs.String("spend-store", "", "the gate's spend store (a file or redis:// URL): each sub-task's spend is shown")
		format := fs.String("format", "mermaid", "mermaid (a graph TD diagram), text or json")
		names := fs.StringArray("name", nil, "show principal ID (or did:key) ID as NAME (repeatable)")
		asJSON := fs.Bool("json", false, "the same as --format json")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if *planArg == "" {
				return usagef("--plan is required")
			}
			if *asJSON {
				*format = "json"
			}
			if *format != "mermaid" && *format != "text" && *format != "json" {
				return usagef("--format must be mermaid, text or json")
			}
			label, err := principalNames(*names)
			if err != nil {
				return err
			}
			p, err := loadPlan(*planArg, *ws)
			if err != nil {
				return err
			}
			ds, err := chain.Load(filepath.Join(*ws, wsDelegations))
			if err != nil && !errors.Is(err, iofs.ErrNotExist) {
				return inputf("the delegation chain cannot be read: %v", err)
			}
			var usage []budget.Usage
			if *spendStore != "" {
				if usage, err = budget.ReadUsage(*spendStore); err != nil {
					return inputf("the spend store %s cannot be read: %v", *spendStore, err)
				}
			}
			rows := planRows(p, ds, usage)
			switch *format {
			case "json":
				return writeJSON(e, struct {
					Plan     *contract.Plan `json:"plan"`
					SubTasks []planRow      `json:"subTasks"`
				}{p, rows})
			case "text":
				fmt.Fprintf(e.stdout, "plan %s (%s) of contract %s by %s\n", p.ID, p.Strategy, p.ParentContractID, render.Printable(label(p.Issuer)))
				for _, r := range rows {
					fmt.Fprintf(e.stdout, "  %s %q  %s  assignee %s  spent %d of %d", r.ID, render.Printable(r.Title), r.Status, render.Printable(label(r.Assignee)), r.Spent, r.Allotted)
					if len(r.WaitsFor) > 0 {
						fmt.Fprintf(e.stdout, "  waits for %s", strings.Join(r.WaitsFor, ", "))
					}
					fmt.Fprintln(e.stdout)
				}
			default:
				_, err := e.stdout.Write([]byte(planMermaid(p, rows, label)))
				return err
			}
			return nil
		}
	},
}

// loadPlan reads a plan by ID from the workspace, or from a file, and
// verifies it.
func loadPlan(arg, ws string) (*contract.Plan, error) {
	path := arg
	if contract.ValidPlanID(arg) {
		path = filepath.Join(ws, wsPlans, arg+".json")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, inputf("--plan: %v", err)
	}
	p, err := contract.ParsePlan(b)
	if err == nil {
		err = p.Verify()
	}
	if err != nil {
		return nil, checkError{fmt.Sprintf("%s: %v", path, err)}
	}
	return p, nil
}

// planRow is where a sub-task stands.
type planRow struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Assignee string `json:"assignee"`
	// Status is the chain's status of its delegation, "not started" when
	// the chain does not record it, or "waiting" while a dependency has
	// not completed.
	Status   string   `json:"status"`
	WaitsFor []string `json:"waitsFor,omitempty"`
	Allotted int64    `json:"allotted"`
	Spent    int64    `json:"spent"`
	Returned int64    `json:"returned"`
}

func planRows(p *contract.Plan, ds []chain.Delegation, usage []budget.Usage) []planRow {
	byKey := map[string]*chain.Delegation{}
	for i := range ds {
		if ds[i].Key != "" {
			byKey[ds[i].Key] = &ds[i]
		}
	}
	spent := map[string]int64{}
	for _, u := range usage {
		spent[u.Key] = u.Committed + u.Reserved
	}
	status := func(st *contract.SubTask) string {
		if d := byKey[st.DelegationKey]; d != nil {
			return string(d.Status)
		}
		return "not started"
	}
	var rows []planRow
	for i := range p.SubTasks {
		st := &p.SubTasks[i]
		r := planRow{ID: st.ID, Title: st.Title, Assignee: st.Assignee, Status: status(st), Allotted: st.BudgetMicrocents}
		for _, dep := range st.DependsOn {
			if d := p.SubTask(dep); d != nil && status(d) != string(chain.StatusCompleted) {
				r.WaitsFor = append(r.WaitsFor, dep)
			}
		}
		if len(r.WaitsFor) > 0 && (r.Status == "not started" || r.Status == string(chain.StatusActive)) {
			r.Status = "waiting"
		}
		if d := byKey[st.DelegationKey]; d != nil {
			if tok, err := dct.Parse(d.DCT.Token); err == nil {
				r.Spent = spent[gate.BudgetKey(tok)]
			}
			if d.Status != chain.StatusActive {
				r.Returned = max(0, r.Allotted-r.Spent)
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// planMermaid draws the plan as a graph TD: a node per sub-task (n0, n1,
// … in plan order, every label through render.MermaidText) and an edge
// from each dependency to what depends on it, coloured by status.
func planMermaid(p *contract.Plan, rows []planRow, label func(string) string) string {
	m := render.MermaidText
	var b strings.Builder
	b.WriteString("graph TD\n")
	node := map[string]string{}
	for i, r := range rows {
		node[r.ID] = "n" + strconv.Itoa(i)
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "  %s[\"%s: %s<br/>%s #183; %s<br/>spent %d of %d\"]:::%s\n", node[r.ID], m(r.ID), m(r.Title),
			m(label(r.Assignee)), m(r.Status), r.Spent, r.Allotted, statusClass(r.Status))
	}
	for _, st := range p.SubTasks {
		for _, dep := range st.DependsOn {
			fmt.Fprintf(&b, "  %s --> %s\n", node[dep], node[st.ID])
		}
	}
	b.WriteString("  classDef completed fill:#d4edda,stroke:#28a745\n")
	b.WriteString("  classDef failed fill:#f8d7da,stroke:#dc3545\n")
	b.WriteString("  classDef waiting fill:#fff3cd,stroke:#ffc107\n")
	b.WriteString("  classDef active fill:#d1ecf1,stroke:#17a2b8\n")
	b.WriteString("  classDef idle fill:#eeeeee,stroke:#999999\n")
	return b.String()
}

func statusClass(s string) string {
	switch s {
	case string(chain.StatusCompleted), string(chain.StatusFailed), "waiting", string(chain.StatusActive):
		return s
	case string(chain.StatusRevoked):
		return "failed"
	}
	return "idle"
}
