package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/delegateos/delegateos/internal/mcpdef"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/internal/mcplist"
	"github.com/delegateos/delegateos/policy"
)

var policyCheckCmd = &command{
	name:    "check",
	args:    "FILE [--json] [--upstream [--timeout D] -- UPSTREAM_COMMAND [ARGS...]]",
	summary: "validate a policy file: a summary (exit 0, with any warnings) or every problem with its line (exit 1)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		asJSON := fs.Bool("json", false, "print the parsed policy and its warnings, or the problems, as JSON")
		upstream := fs.Bool("upstream", false, "also start the MCP server given after --, list its tools and warn of rules that match none of them")
		timeout := fs.Duration("timeout", initTimeout, "with --upstream, how long the server may take to start and list its tools")
		return func(e *env, args []string) error {
			var command []string
			switch dash := fs.ArgsLenAtDash(); {
			case *upstream && (dash < 0 || len(args) == dash):
				return usagef("--upstream needs the MCP server's command after --, e.g. delegateos policy check policy.yaml --upstream -- npx -y @modelcontextprotocol/server-everything")
			case !*upstream && dash >= 0:
				return usagef("a command after -- is checked only with --upstream: delegateos policy check FILE --upstream -- COMMAND")
			case dash >= 0:
				command = args[dash:]
				args = args[:dash]
			}
			if len(args) != 1 {
				return usagef("give exactly one policy FILE")
			}
			if *timeout <= 0 {
				return usagef("--timeout must be positive")
			}
			file := args[0]
			p, warnings, err := policy.Lint(file)
			var problems policy.Errors
			switch {
			case errors.As(err, &problems):
				if werr := writeProblems(e, *asJSON, file, problems); werr != nil {
					return werr
				}
				return checkError{problems.Error()}
			case err != nil:
				return inputf("%v", err)
			}
			var up *upstreamCheck
			if command != nil {
				l, err := mcplist.List(command, mcplist.Options{Timeout: *timeout, ClientName: "delegateos policy check", Definitions: true})
				if err != nil {
					return inputError{err}
				}
				up = &upstreamCheck{command: command, tools: l.ToolNames(), prompts: promptNames(l)}
				var ws []*policy.Warning
				ws, up.unmatched = p.CheckOffered(policy.Offered{Tools: up.tools, Prompts: up.prompts})
				for _, w := range ws {
					w.File = file
				}
				warnings = append(warnings, ws...)
				slices.SortStableFunc(warnings, func(a, b *policy.Warning) int { return a.Line - b.Line })
			}
			if *asJSON {
				return writeJSON(e, policySummary(file, p, warnings, up))
			}
			writePolicySummary(e.stdout, file, p, warnings, up)
			return nil
		}
	},
}

// upstreamCheck is what 'policy check --upstream' found.
type upstreamCheck struct {
	command   []string
	tools     []string
	prompts   []string // nil when the upstream offers no prompts
	unmatched []policy.Unmatched
}

type problemJSON struct {
	Line    int    `json:"line"`
	Column  int    `json:"column,omitempty"`
	Key     string `json:"key,omitempty"`
	Message string `json:"message"`
}

func writeProblems(e *env, asJSON bool, file string, problems policy.Errors) error {
	if !asJSON {
		for _, p := range problems {
			fmt.Fprintln(e.stdout, p.Error())
		}
		return nil
	}
	out := struct {
		File     string        `json:"file"`
		OK       bool          `json:"ok"`
		Problems []problemJSON `json:"problems"`
	}{File: file}
	for _, p := range problems {
		out.Problems = append(out.Problems, problemJSON{Line: p.Line, Column: p.Column, Key: p.Key, Message: p.Msg})
	}
	return writeJSON(e, out)
}

// The JSON summary uses the policy file's own key names.
type policyJSON struct {
	File                 string       `json:"file"`
	OK                   bool         `json:"ok"`
	Roots                []string     `json:"roots"`
	Tools                []ruleJSON   `json:"tools"`
	Resources            []ruleJSON   `json:"resources"`
	Prompts              []ruleJSON   `json:"prompts"`
	Methods              []methodJSON `json:"methods,omitempty"`
	DefaultCost          int64        `json:"default_cost"`
	Rate                 string       `json:"rate,omitempty"`
	AllowUnauthenticated bool         `json:"allow_unauthenticated"`
	HonourUpstreamCost   bool         `json:"honour_upstream_cost"`
	RevocationList       string       `json:"revocation_list"`
	SpendStore           string       `json:"spend_store"`
	MaxFrameBytes        int          `json:"max_frame_bytes"`
	Log                  struct {
		File  string `json:"file"`
		Level string `json:"level"`
	} `json:"log"`
	Workspace  string   `json:"workspace"`
	Judge      []string `json:"judge_command"`
	Reputation struct {
		Completeness float64           `json:"completeness"`
		Clarity      float64           `json:"clarity"`
		TrustGate    *policy.TrustGate `json:"trust_gate"`
	} `json:"reputation"`
	UpstreamUser string        `json:"upstream_user"`
	ToolPins     string        `json:"tool_pins"`
	Warnings     []problemJSON `json:"warnings"`
	// Upstream is what --upstream found.
	Upstream *upstreamJSON `json:"upstream,omitempty"`
}

type upstreamJSON struct {
	Command []string `json:"command"`
	Tools   []string `json:"tools"`
	// Unmatched are the tools no rule matches.
	Unmatched []unmatchedJSON `json:"unmatched"`
}

type unmatchedJSON struct {
	Section string `json:"section"`
	Name    string `json:"name"`
	// Default is the capability a call needs: the default mapping.
	Default string `json:"default"`
}

type ruleJSON struct {
	Line      int    `json:"line"`
	Match     string `json:"match"`
	Namespace string `json:"namespace"`
	Action    string `json:"action"`
	// Resource is the literal, or {arg, prefix}; a resource rule has none
	// (the resource is the URI), nor has a prompt rule whose resource is
	// the prompt's name.
	Resource any `json:"resource,omitempty"`
	// Cost is what a call costs: the rule's cost or the default.
	Cost int64 `json:"cost"`
	// MaxCost caps a cost the upstream reports: the rule's max_cost or
	// the cost.
	MaxCost int64 `json:"max_cost"`
	// Rate is the rule's rate limit, N/DURATION; "" when it sets none.
	Rate string `json:"rate,omitempty"`
	// Approval says which calls wait for a person's approval; absent when
	// none do.
	Approval *approvalJSON `json:"approval,omitempty"`
}

// approvalJSON is a rule's approval: required, or above a cost, and how
// long the answer is waited for.
type approvalJSON struct {
	Required bool   `json:"required,omitempty"`
	Above    *int64 `json:"above,omitempty"`
	Timeout  string `json:"timeout"`
}

func policySummary(file string, p *policy.Policy, warnings []*policy.Warning, up *upstreamCheck) policyJSON {
	s := policyJSON{File: file, OK: true, Roots: p.Roots, DefaultCost: p.DefaultCost, Rate: p.Rate.String(),
		AllowUnauthenticated: p.AllowUnauthenticated, HonourUpstreamCost: p.HonourUpstreamCost,
		RevocationList: redactStore(p.RevocationList), SpendStore: redactStore(p.SpendStore), MaxFrameBytes: p.MaxFrameBytes,
		UpstreamUser: p.UpstreamUser, ToolPins: p.ToolPins, Warnings: []problemJSON{}}
	for _, w := range warnings {
		s.Warnings = append(s.Warnings, problemJSON{Line: w.Line, Key: w.Key, Message: w.Msg})
	}
	if up != nil {
		s.Upstream = &upstreamJSON{Command: up.command, Tools: up.tools, Unmatched: []unmatchedJSON{}}
		if s.Upstream.Tools == nil {
			s.Upstream.Tools = []string{}
		}
		for _, u := range up.unmatched {
			s.Upstream.Unmatched = append(s.Upstream.Unmatched, unmatchedJSON{Section: u.Section, Name: u.Name, Default: u.Default})
		}
	}
	if s.Roots == nil {
		s.Roots = []string{}
	}
	s.Log.File, s.Log.Level = p.Log.File, p.Log.Level
	s.Workspace, s.Judge = p.Workspace, p.Judge.Command
	if s.Judge == nil {
		s.Judge = []string{}
	}
	s.Reputation.Completeness, s.Reputation.Clarity = criterion(p.Reputation.Completeness), criterion(p.Reputation.Clarity)
	s.Reputation.TrustGate = p.Reputation.TrustGate
	s.Tools, s.Resources, s.Prompts = rulesJSON(p, p.Tools), rulesJSON(p, p.Resources), rulesJSON(p, p.Prompts)
	for _, r := range p.Methods {
		c, _ := p.MapMethod(r.Method)
		s.Methods = append(s.Methods, methodJSON{Line: r.Line, Method: r.Method, Namespace: c.Namespace, Action: c.Action, Resource: c.Resource, Cost: c.Cost})
	}
	return s
}

// methodJSON is a methods rule, with the resource and cost it resolves to.
type methodJSON struct {
	Line      int    `json:"line"`
	Method    string `json:"method"`
	Namespace string `json:"namespace"`
	Action    string `json:"action"`
	Resource  string `json:"resource"`
	Cost      int64  `json:"cost"`
}

func rulesJSON(p *policy.Policy, rules []policy.Rule) []ruleJSON {
	out := []ruleJSON{}
	for _, r := range rules {
		var res any
		switch {
		case r.Resource.Arg != "":
			res = map[string]string{"arg": r.Resource.Arg, "prefix": r.Resource.Prefix}
		case r.Resource.Value != "":
			res = r.Resource.Value
		}
		cost, maxCost := ruleCosts(p, r)
		rj := ruleJSON{Line: r.Line, Match: r.Match, Namespace: r.Namespace,
			Action: r.Action, Resource: res, Cost: cost, MaxCost: maxCost, Rate: r.Rate.String()}
		if a := r.Approval; a.Required || a.Above != nil {
			rj.Approval = &approvalJSON{Required: a.Required, Above: a.Above, Timeout: a.Wait().String()}
		}
		out = append(out, rj)
	}
	return out
}

// ruleCosts is what a call a rule decides costs, and the cap on what the
// upstream may report for it.
func ruleCosts(p *policy.Policy, r policy.Rule) (cost, maxCost int64) {
	cost = p.DefaultCost
	if r.Cost != nil {
		cost = *r.Cost
	}
	maxCost = cost
	if r.MaxCost != nil {
		maxCost = max(*r.MaxCost, cost)
	}
	return cost, maxCost
}

// writeRules writes one map's rules, each with the capability it requests;
// resource stands for the resource a rule with none requests.
func writeRules(tw io.Writer, p *policy.Policy, rules []policy.Rule, resource string) {
	for _, r := range rules {
		res := r.Resource.String()
		if res == "" {
			res = resource
		}
		cost, maxCost := ruleCosts(p, r)
		upTo := ""
		switch {
		case r.MaxCost != nil && p.HonourUpstreamCost:
			upTo = fmt.Sprintf(" or up to %d reported", maxCost)
		case r.MaxCost != nil:
			upTo = fmt.Sprintf(" (max_cost %d unused: upstream-reported cost is ignored)", maxCost)
		}
		if !r.Rate.IsZero() {
			upTo += ", at most " + r.Rate.String()
		}
		if a := r.Approval.String(); a != "" {
			upTo += ", " + a
		}
		fmt.Fprintf(tw, "  %s\t%s:%s:%s, cost %d%s (line %d)\n", r.Match, r.Namespace, r.Action, res, cost, upTo, r.Line)
	}
}

func writePolicySummary(w io.Writer, file string, p *policy.Policy, warnings []*policy.Warning, up *upstreamCheck) {
	if len(warnings) == 0 {
		fmt.Fprintf(w, "%s: ok\n", file)
	} else {
		fmt.Fprintf(w, "%s: ok, with %d %s\n", file, len(warnings), plural(len(warnings), "warning", "warnings"))
	}
	for _, wn := range warnings {
		fmt.Fprintln(w, wn.String())
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "roots:\t%d\n", len(p.Roots))
	for _, r := range p.Roots {
		fmt.Fprintf(tw, "  %s\t\n", r)
	}
	fmt.Fprintf(tw, "tools:\t%d %s (first match wins; any other tool needs %s:<tool>:*)\n",
		len(p.Tools), plural(len(p.Tools), "rule", "rules"), policy.DefaultNamespace)
	writeRules(tw, p, p.Tools, "")
	fmt.Fprintf(tw, "resources:\t%d %s (first match wins; any other URI needs %s:%s:<URI>)\n",
		len(p.Resources), plural(len(p.Resources), "rule", "rules"), policy.ResourceNamespace, policy.ResourceAction)
	writeRules(tw, p, p.Resources, "<URI>")
	fmt.Fprintf(tw, "prompts:\t%d %s (first match wins; any other prompt needs %s:%s:<name>)\n",
		len(p.Prompts), plural(len(p.Prompts), "rule", "rules"), policy.PromptNamespace, policy.PromptAction)
	writeRules(tw, p, p.Prompts, "<name>")
	if len(p.Methods) > 0 {
		fmt.Fprintf(tw, "methods:\t%d vendor extension %s (any other method MCP does not define is refused, -32601)\n",
			len(p.Methods), plural(len(p.Methods), "method", "methods"))
		for _, r := range p.Methods {
			c, _ := p.MapMethod(r.Method)
			fmt.Fprintf(tw, "  %s\t%s:%s:%s, cost %d (line %d)\n", r.Method, c.Namespace, c.Action, c.Resource, c.Cost, r.Line)
		}
	}
	fmt.Fprintf(tw, "default cost:\t%d microcents\n", p.DefaultCost)
	writeRates(tw, p)
	fmt.Fprintf(tw, "calls without a token:\t%s\n", choose(p.AllowUnauthenticated, "forwarded", "denied"))
	fmt.Fprintf(tw, "upstream-reported cost:\t%s\n", choose(p.HonourUpstreamCost, "honoured, up to each rule's max_cost", "ignored"))
	fmt.Fprintf(tw, "revocation list:\t%s\n", orNone(redactStore(p.RevocationList)))
	fmt.Fprintf(tw, "spend store:\t%s\n", orNone(redactStore(p.SpendStore)))
	fmt.Fprintf(tw, "max frame bytes:\t%d\n", p.MaxFrameBytes)
	fmt.Fprintf(tw, "log:\t%s, level %s\n", choose(p.Log.File == "", "stderr", p.Log.File), p.Log.Level)
	if p.Workspace == "" {
		fmt.Fprintf(tw, "workspace:\tnone (delegateos/delegate, complete and revoke are refused)\n")
	} else {
		fmt.Fprintf(tw, "workspace:\t%s\n", p.Workspace)
		fmt.Fprintf(tw, "llm_judge:\t%s\n", choose(len(p.Judge.Command) == 0, "none (contracts that need a judge cannot be verified)", strings.Join(p.Judge.Command, " ")))
		fmt.Fprintf(tw, "evaluation defaults:\tcompleteness %.2f, clarity %.2f\n", criterion(p.Reputation.Completeness), criterion(p.Reputation.Clarity))
		if g := p.Reputation.TrustGate; g != nil {
			fmt.Fprintf(tw, "trust gate:\trefuse reliability below %.2f once confidence is at least %.2f\n", g.MinReliability, g.MinConfidence)
			if f := g.StarterFloor; f != nil {
				fmt.Fprintf(tw, "starter floor:	reliability counts as 0.25 until %d of %d trusted attesters attested the agent\n", f.MinAttesters, len(f.TrustedAttesters))
			}
		}
	}
	fmt.Fprintf(tw, "upstream user:\t%s\n", choose(p.UpstreamUser == "", "the proxy's own (the upstream can read the proxy's token; see upstream_user)", p.UpstreamUser))
	fmt.Fprintf(tw, "tool pins:\t%s\n", choose(p.ToolPins == "", "none (definitions are not checked; see tool_pins and 'delegateos pin')", p.ToolPins))
	if up != nil {
		fmt.Fprintf(tw, "upstream tools:\t%d listed by %s\n", len(up.tools), clipArg(strings.Join(up.command, " ")))
		if up.prompts != nil {
			fmt.Fprintf(tw, "upstream prompts:\t%d listed\n", len(up.prompts))
		}
		if len(up.unmatched) > 0 {
			fmt.Fprintf(tw, "matched by no rule:\t%d (each needs the default capability)\n", len(up.unmatched))
		}
		for _, u := range up.unmatched {
			fmt.Fprintf(tw, "  %s\t%s\n", u.Name, u.Default)
		}
	}
	tw.Flush()
}

func clipArg(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

func criterion(v *float64) float64 {
	if v == nil {
		return policy.DefaultCriterionScore
	}
	return *v
}

func plural(n int, one, many string) string { return choose(n == 1, one, many) }

func choose(c bool, yes, no string) string {
	if c {
		return yes
	}
	return no
}

func orNone(s string) string { return choose(s == "", "none", s) }

var policyInitCmd = &command{
	name:    "init",
	args:    "[--out FILE] [--namespace NS] [--timeout D] -- UPSTREAM_COMMAND [ARGS...]",
	summary: "start an MCP server, list its tools and write a starter policy: one rule for its read-only tools (mcp:read), one for the rest (mcp:write)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		out := fs.String("out", "", "write the policy to this file (never overwritten) instead of standard output")
		ns := fs.String("namespace", policy.DefaultNamespace, "the namespace of every rule")
		timeout := fs.Duration("timeout", initTimeout, "how long the upstream may take to start and list its tools")
		asJSON := fs.Bool("json", false, "with --out, print what was written as JSON")
		return func(e *env, args []string) error {
			if fs.ArgsLenAtDash() != 0 || len(args) == 0 {
				return usagef("give the upstream command after --, e.g. delegateos policy init -- npx -y @modelcontextprotocol/server-everything")
			}
			if *asJSON && *out == "" {
				return usagef("--json needs --out: without it the policy itself is the output")
			}
			if *timeout <= 0 {
				return usagef("--timeout must be positive")
			}
			// Refuse a bad namespace or an existing file before starting anything.
			if err := policy.WriteStarter(io.Discard, policy.Starter{Namespace: *ns}); err != nil {
				return usagef("--%v", err) // --namespace "X": why
			}
			if *out != "" {
				if _, err := os.Lstat(*out); err == nil {
					return inputf("%s already exists; not overwriting it", *out)
				}
			}
			tools, err := listUpstreamTools(args, *timeout)
			if err != nil {
				return inputError{err}
			}
			var b strings.Builder
			if err := policy.WriteStarter(&b, policy.Starter{Command: args, Namespace: *ns, Tools: tools}); err != nil {
				return err
			}
			if *out == "" {
				_, err := io.WriteString(e.stdout, b.String())
				return err
			}
			if err := writeNewFile(*out, b.String()); err != nil {
				return inputError{err}
			}
			if *asJSON {
				names := make([]string, len(tools))
				for i, t := range tools {
					names[i] = t.Name
				}
				return writeJSON(e, struct {
					Out   string   `json:"out"`
					Tools []string `json:"tools"`
				}{*out, names})
			}
			fmt.Fprintf(e.stdout, "wrote %s: %d %s; edit it, then run 'delegateos policy check %s'\n",
				*out, len(tools), plural(len(tools), "tool", "tools"), *out)
			return nil
		}
	},
}

// writeNewFile writes a file that must not exist yet.
func writeNewFile(path, content string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s already exists; not overwriting it", path)
		}
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// promptNames are the names of the prompts an upstream listed; nil when it
// offers none.
func promptNames(l *mcplist.Listing) []string {
	raw := l.Raw[mcpdef.Prompt]
	if raw == nil {
		return nil
	}
	names := make([]string, 0, len(raw))
	for _, r := range raw {
		var p struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(r, &p) == nil && p.Name != "" {
			names = append(names, p.Name)
		}
	}
	return names
}
