package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/reputation"
)

// rdpContractGroup holds the commands on RDP delegation contracts (§5).
var rdpContractGroup = &command{
	name:    "rdp-contract",
	summary: "create RDP delegation contracts and move them draft → active → completed → evaluated",
	subs:    []*command{rdpCreateCmd, rdpActivateCmd, rdpCompleteCmd, rdpEvaluateCmd, rdpShowCmd, rdpListCmd},
}

// namedScores reads repeated NAME=NUMBER flags.
func namedScores(flag string, items []string) (map[string]float64, error) {
	if len(items) == 0 {
		return nil, nil
	}
	out := make(map[string]float64, len(items))
	for _, it := range items {
		name, num, ok := strings.Cut(it, "=")
		x, err := strconv.ParseFloat(num, 64)
		if !ok || name == "" || err != nil || !(x >= 0 && x <= 1) {
			return nil, usagef("%s %q: want NAME=NUMBER with a number from 0.0 to 1.0", flag, it)
		}
		if _, dup := out[name]; dup {
			return nil, usagef("%s: %q given twice", flag, name)
		}
		out[name] = x
	}
	return out, nil
}

// oneSlug reads the single SLUG argument.
func oneSlug(args []string) (string, error) {
	if len(args) != 1 {
		return "", usagef("give exactly one contract SLUG (or contract:SLUG)")
	}
	return args[0], nil
}

var rdpCreateCmd = &command{
	name: "create",
	args: "SLUG --delegate ID --description TEXT [--delegator ID] [--deadline TIME]\n" +
		"                    [--criterion NAME=WEIGHT...] [--output-format F] [--output-slug S] [--domain D]\n" +
		"                    [--include ITEM...] [--exclude ITEM...] [--require-citations] [--confidence-threshold N]\n" +
		"                    [--delegation DEL [--task-contract CT]] [--at TIME] [--workspace DIR] [--json]",
	summary: "write a new delegation contract, in status draft",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		delegator := fs.String("delegator", "", "who delegates: principal ID or DID (default: the did in the workspace's IDENTITY.md)")
		delegate := fs.String("delegate", "", "who does the work: principal ID or did:key (or the DID of an existing profile)")
		description := fs.String("description", "", "what needs to be done")
		deadline := fs.String("deadline", "", "the deadline, RFC 3339")
		criteria := fs.StringArray("criterion", nil, "an evaluation criterion and its weight, e.g. accuracy=0.4 (repeatable; weights must sum to 1.0; default: completeness 0.3, accuracy 0.4, clarity 0.2, timeliness 0.1)")
		outputFormat := fs.String("output-format", "", `the expected output type, e.g. "knowledge-artifact"`)
		outputSlug := fs.String("output-slug", "", "the expected artifact's slug (its tags name the domains rated)")
		domain := fs.String("domain", "", "the domain rated when the artifact has no tags")
		include := fs.StringArray("include", nil, "in scope (repeatable)")
		exclude := fs.StringArray("exclude", nil, "out of scope (repeatable)")
		citations := fs.Bool("require-citations", false, "the delegate must cite sources")
		threshold := fs.String("confidence-threshold", "", "the minimum confidence for claims, 0.0 to 1.0")
		delegation := fs.String("delegation", "", "link the contract to this DelegateOS delegation ID; the slug is then derived from it")
		taskContract := fs.String("task-contract", "", "the DelegateOS task contract ID of the linked delegation")
		at := fs.String("at", "", "the creation time, RFC 3339 (default: now)")
		dir := workspaceFlag(fs)
		asJSON := fs.Bool("json", false, "print the contract as JSON")
		return func(e *env, args []string) error {
			var slug string
			switch {
			case len(args) == 1:
				slug = strings.TrimPrefix(args[0], reputation.ContractIDPrefix)
			case len(args) == 0 && *delegation != "":
			default:
				return usagef("give one contract SLUG (it may be left out with --delegation)")
			}
			if *delegate == "" || *description == "" {
				return usagef("--delegate and --description are required")
			}
			created, err := atFlag(*at)
			if err != nil {
				return err
			}
			p := reputation.ContractParams{
				Slug: slug, Delegate: *delegate, Created: created,
				Task:         reputation.Task{Description: *description, OutputFormat: *outputFormat, OutputSlug: *outputSlug, Domain: *domain},
				DelegationID: *delegation, TaskContractID: *taskContract,
			}
			if *deadline != "" {
				if p.Deadline, err = parseTime("--deadline", *deadline); err != nil {
					return err
				}
			}
			if p.Criteria, err = namedScores("--criterion", *criteria); err != nil {
				return err
			}
			if len(*include) > 0 || len(*exclude) > 0 {
				p.Scope = &reputation.Scope{Include: *include, Exclude: *exclude}
			}
			if *citations || *threshold != "" {
				p.Constraints = &reputation.Constraints{}
				if *citations {
					p.Constraints.RequireCitations = citations
				}
				if *threshold != "" {
					x, err := strconv.ParseFloat(*threshold, 64)
					if err != nil || !(x >= 0 && x <= 1) {
						return usagef("--confidence-threshold must be a number from 0.0 to 1.0")
					}
					p.Constraints.ConfidenceThreshold = &x
				}
			}
			w, err := openWorkspace(*dir)
			if err != nil {
				return err
			}
			if p.Delegator, err = delegatorOrIdentity(w, *delegator); err != nil {
				return err
			}
			c, err := w.CreateContract(p)
			if err != nil {
				return repError(err)
			}
			if *asJSON {
				return writeJSON(e, c)
			}
			fmt.Fprintf(e.stdout, "created %s (%s) in %s/%s.md\n", c.ID(), c.Status, reputation.ContractsDir, c.Slug)
			return nil
		}
	},
}

func delegatorOrIdentity(w *reputation.Workspace, flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	did, err := w.Observer()
	if errors.Is(err, reputation.ErrNotFound) {
		return "", usagef("--delegator is required: the workspace has no %s with a did", reputation.IdentityFile)
	}
	if err != nil {
		return "", inputError{err}
	}
	return did, nil
}

// stepCmd is activate or complete.
func stepCmd(name, summary string, step func(*reputation.Workspace, string) (*reputation.Contract, error)) *command {
	return &command{
		name:    name,
		args:    "SLUG [--workspace DIR] [--json]",
		summary: summary,
		flags: func(fs *pflag.FlagSet) func(*env, []string) error {
			dir := workspaceFlag(fs)
			asJSON := fs.Bool("json", false, "print the contract as JSON")
			return func(e *env, args []string) error {
				slug, err := oneSlug(args)
				if err != nil {
					return err
				}
				w, err := openWorkspace(*dir)
				if err != nil {
					return err
				}
				c, err := step(w, slug)
				if err != nil {
					return repError(err)
				}
				if *asJSON {
					return writeJSON(e, c)
				}
				fmt.Fprintf(e.stdout, "%s is now %s\n", c.ID(), c.Status)
				return nil
			}
		},
	}
}

var rdpActivateCmd = stepCmd("activate", "move a draft contract to active: the delegate took the work on", (*reputation.Workspace).Activate)

var rdpCompleteCmd = stepCmd("complete", "move an active contract to completed: the delegate says the work is done", (*reputation.Workspace).Complete)

var rdpEvaluateCmd = &command{
	name:    "evaluate",
	args:    "SLUG --score CRITERION=SCORE... [--source ID] [--at TIME] [--workspace DIR] [--json]",
	summary: "score a completed contract; records the generated signals in the delegate's profile",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		scores := fs.StringArray("score", nil, "a criterion's score, e.g. accuracy=0.85 (repeatable; every criterion must be scored, except those the proxy measured)")
		src := fs.String("source", "", "the evaluator: principal ID or DID (default: the delegator)")
		at := fs.String("at", "", "when the evaluation is made, RFC 3339 (default: now)")
		dir := workspaceFlag(fs)
		asJSON := fs.Bool("json", false, "print the contract and the signals as JSON")
		return func(e *env, args []string) error {
			slug, err := oneSlug(args)
			if err != nil {
				return err
			}
			m, err := namedScores("--score", *scores)
			if err != nil {
				return err
			}
			when, err := atFlag(*at)
			if err != nil {
				return err
			}
			w, err := openWorkspace(*dir)
			if err != nil {
				return err
			}
			c, signals, err := w.Evaluate(slug, m, *src, when)
			if err != nil {
				return repError(err)
			}
			if *asJSON {
				return writeJSON(e, struct {
					Contract *reputation.Contract `json:"contract"`
					Signals  []reputation.Signal  `json:"signals"`
				}{c, signals})
			}
			fmt.Fprintf(e.stdout, "evaluated %s: weighted score %s\n", c.ID(), fmtScore(signals[0].Score))
			for _, s := range signals {
				label := s.Dimension
				if s.Domain != "" {
					label = "domain " + s.Domain
				}
				fmt.Fprintf(e.stdout, "recorded %s %s for %s in %s/%s.md\n", label, fmtScore(s.Score), c.Delegate, reputation.ProfilesDir, c.DelegateSlug)
			}
			return nil
		}
	},
}

var rdpShowCmd = &command{
	name:    "show",
	args:    "SLUG [--workspace DIR] [--json]",
	summary: "show a contract: parties, task, status, criteria and result",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		dir := workspaceFlag(fs)
		asJSON := fs.Bool("json", false, "print JSON, with the field names of RDP §5.2")
		return func(e *env, args []string) error {
			slug, err := oneSlug(args)
			if err != nil {
				return err
			}
			w, err := openWorkspace(*dir)
			if err != nil {
				return err
			}
			c, err := w.Contract(slug)
			if err != nil {
				return repError(err)
			}
			if *asJSON {
				return writeJSON(e, c)
			}
			writeContract(e.stdout, c)
			return nil
		}
	},
}

func writeContract(w io.Writer, c *reputation.Contract) {
	fmt.Fprintf(w, "%s  %s\n", c.ID(), strings.ToUpper(string(c.Status)))
	fmt.Fprintf(w, "delegator  %s\n", c.Delegator)
	fmt.Fprintf(w, "delegate   %s (%s/%s.md)\n", c.Delegate, reputation.ProfilesDir, c.DelegateSlug)
	fmt.Fprintf(w, "created    %s\n", timestamp.Format(c.Created))
	if !c.Deadline.IsZero() {
		fmt.Fprintf(w, "deadline   %s\n", timestamp.Format(c.Deadline))
	}
	if c.Link != nil {
		fmt.Fprintf(w, "delegation %s", c.Link.DelegationID)
		if c.Link.TaskContractID != "" {
			fmt.Fprintf(w, " (task contract %s)", c.Link.TaskContractID)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\ntask: %s\n", strings.ReplaceAll(c.Task.Description, "\n", "\n      "))
	if c.Task.OutputFormat != "" {
		fmt.Fprintf(w, "output: %s", c.Task.OutputFormat)
		if c.Task.OutputSlug != "" {
			fmt.Fprintf(w, " (%s)", c.Task.OutputSlug)
		}
		fmt.Fprintln(w)
	}
	if c.Scope != nil {
		for _, it := range c.Scope.Include {
			fmt.Fprintf(w, "in scope: %s\n", it)
		}
		for _, it := range c.Scope.Exclude {
			fmt.Fprintf(w, "out of scope: %s\n", it)
		}
	}
	fmt.Fprintf(w, "\n%-16s %7s %7s\n", "CRITERION", "WEIGHT", "SCORE")
	for _, name := range c.CriteriaNames() {
		score := "-"
		if s, ok := c.Result[name]; ok {
			score = fmtScore(s)
		} else if c.Link != nil {
			if s, ok := c.Link.Measured[name]; ok {
				score = fmtScore(s) + " (measured)"
			}
		}
		fmt.Fprintf(w, "%-16s %7.2f %7s\n", shorten(name, 16), c.Criteria[name], score)
	}
	if c.Result != nil {
		if ws, err := reputation.WeightedScore(c.Criteria, c.Result); err == nil {
			fmt.Fprintf(w, "%-16s %7s %7s\n", "weighted", "", fmtScore(ws))
		}
	}
}

var rdpListCmd = &command{
	name:    "list",
	args:    "[--status S] [--workspace DIR] [--json]",
	summary: "list the workspace's contracts",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		status := fs.String("status", "", "only contracts in this status")
		dir := workspaceFlag(fs)
		asJSON := fs.Bool("json", false, "print JSON")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if *status != "" && !reputation.Status(*status).Valid() {
				return usagef("--status must be draft, active, completed or evaluated")
			}
			w, err := openWorkspace(*dir)
			if err != nil {
				return err
			}
			all, err := w.Contracts()
			if err != nil {
				return repError(err)
			}
			list := []*reputation.Contract{}
			for _, c := range all {
				if *status == "" || string(c.Status) == *status {
					list = append(list, c)
				}
			}
			if *asJSON {
				return writeJSON(e, list)
			}
			if len(list) == 0 {
				fmt.Fprintln(e.stdout, "no contracts")
				return nil
			}
			for _, c := range list {
				fmt.Fprintf(e.stdout, "%-30s %-10s %s\n", c.ID(), c.Status, shorten(strings.SplitN(c.Task.Description, "\n", 2)[0], 60))
			}
			return nil
		}
	},
}
