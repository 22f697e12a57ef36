package main

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/reputation"
)

// reputationGroup holds the commands on reputation profiles (RDP §2–§4).
var reputationGroup = &command{
	name:    "reputation",
	summary: "record reputation signals and read decayed scores (RDP)",
	subs:    []*command{reputationSignalCmd, reputationShowCmd, reputationListCmd, reputationAttestCmd, reputationTrustCmd},
}

// source returns the --source flag as given, or the workspace identity's
// DID (IDENTITY.md).
func source(w *reputation.Workspace, flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	did, err := w.Observer()
	if errors.Is(err, reputation.ErrNotFound) {
		return "", usagef("--source is required: the workspace has no %s with a did to record signals as", reputation.IdentityFile)
	}
	if err != nil {
		return "", inputError{err}
	}
	return did, nil
}

var reputationSignalCmd = &command{
	name: "signal",
	args: "--agent AGENT --dimension D [--domain X] --score S [--evidence E] [--message M]\n" +
		"                    [--source ID] [--name NAME] [--at TIME] [--workspace DIR] [--json]",
	summary: "append a signal to an agent's reputation profile (created if missing)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		agent := fs.String("agent", "", "the agent observed: principal ID, did:key, or the slug or DID of an existing profile")
		dimension := fs.String("dimension", "", "reliability, epistemic-hygiene, coordination, a custom name, or domain-competence")
		domain := fs.String("domain", "", "the domain of a domain-competence signal (implies --dimension domain-competence)")
		score := fs.String("score", "", "the observed performance, 0.0 to 1.0")
		evidence := fs.String("evidence", "", `what was observed, e.g. "contract:q3-research"`)
		message := fs.String("message", "", "a note for people")
		src := fs.String("source", "", "the observer: principal ID or DID (default: the did in the workspace's IDENTITY.md)")
		name := fs.String("name", "", "the agent's name, used when its profile is created (default: its DID)")
		at := fs.String("at", "", "when the observation was made, RFC 3339 (default: now)")
		dir := workspaceFlag(fs)
		asJSON := fs.Bool("json", false, "print the signal and the dimension's new score as JSON")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if *agent == "" {
				return usagef("--agent is required")
			}
			if *domain != "" && *dimension == "" {
				*dimension = reputation.DomainCompetence
			}
			if *dimension == "" {
				return usagef("--dimension is required")
			}
			if *domain != "" && *dimension != reputation.DomainCompetence {
				return usagef("--domain goes with --dimension %s", reputation.DomainCompetence)
			}
			if *score == "" {
				return usagef("--score is required")
			}
			s, err := strconv.ParseFloat(*score, 64)
			if err != nil || !(s >= 0 && s <= 1) {
				return usagef("--score must be a number from 0.0 to 1.0")
			}
			when, err := atFlag(*at)
			if err != nil {
				return err
			}
			w, err := openWorkspace(*dir)
			if err != nil {
				return err
			}
			from, err := source(w, *src)
			if err != nil {
				return err
			}
			sg := reputation.Signal{Source: from, Dimension: *dimension, Domain: *domain, Score: s, Timestamp: when, Evidence: *evidence, Message: *message}
			p, err := w.Record(*agent, *name, sg)
			if err != nil {
				return repError(err)
			}
			recorded := p.Signals[len(p.Signals)-1]
			v := p.Score(*dimension, when)
			label := *dimension
			if *domain != "" {
				v, label = p.DomainScore(*domain, when), "domain "+*domain
			}
			if *asJSON {
				return writeJSON(e, struct {
					Profile string            `json:"profile"`
					Agent   string            `json:"agent"`
					Signal  reputation.Signal `json:"signal"`
					Score   reputation.View   `json:"score"`
				}{profileFile(p), p.AgentDID, recorded, v})
			}
			fmt.Fprintf(e.stdout, "recorded %s %s for %s in %s\n", label, fmtScore(s), p.AgentName, profileFile(p))
			fmt.Fprintf(e.stdout, "%s is now %s (confidence %.2f, %s)\n", label, fmtScore(v.Score), v.Confidence, countOf(v.SampleSize, "signal"))
			return nil
		}
	},
}

func profileFile(p *reputation.Profile) string {
	return reputation.ProfilesDir + "/" + p.Slug + ".md"
}

func fmtScore(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }

var reputationShowCmd = &command{
	name:    "show",
	args:    "AGENT [--at TIME] [--workspace DIR] [--json]",
	summary: "show an agent's scores with decay applied, confidence and sample size per dimension",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		at := fs.String("at", "", "read the scores as of this RFC 3339 time (default: now); before a signal, the signals up to then are replayed")
		dir := workspaceFlag(fs)
		asJSON := fs.Bool("json", false, "print JSON")
		return func(e *env, args []string) error {
			if len(args) != 1 {
				return usagef("give exactly one AGENT: a principal ID, a DID or a profile slug")
			}
			when, err := atFlag(*at)
			if err != nil {
				return err
			}
			w, err := openWorkspace(*dir)
			if err != nil {
				return err
			}
			p, err := w.Profile(args[0])
			if errors.Is(err, reputation.ErrNotFound) {
				return showUnknown(e, *asJSON, args[0], when)
			}
			if err != nil {
				return repError(err)
			}
			var dims, domains []reputation.View
			for _, name := range p.DimensionNames() {
				dims = append(dims, p.Score(name, when))
			}
			for _, name := range p.DomainNames() {
				domains = append(domains, p.DomainScore(name, when))
			}
			if *asJSON {
				return writeJSON(e, struct {
					Agent       string            `json:"agent"`
					Name        string            `json:"name"`
					Profile     string            `json:"profile"`
					Known       bool              `json:"known"`
					At          string            `json:"at"`
					Signals     int               `json:"signals"`
					LastUpdated string            `json:"lastUpdated"`
					Dimensions  []reputation.View `json:"dimensions"`
					Domains     []reputation.View `json:"domains"`
				}{p.AgentDID, p.AgentName, profileFile(p), len(p.Signals) > 0, timestamp.Format(when), len(p.Signals), timestamp.Format(p.LastUpdated), dims, orEmpty(domains)})
			}
			if p.AgentName != p.AgentDID {
				fmt.Fprintf(e.stdout, "%s  %s\n", p.AgentName, p.AgentDID)
			} else {
				fmt.Fprintln(e.stdout, p.AgentDID)
			}
			fmt.Fprintf(e.stdout, "%s: %s, last updated %s\n", profileFile(p), countOf(len(p.Signals), "signal"), timestamp.Format(p.LastUpdated))
			fmt.Fprintf(e.stdout, "scores as of %s, decayed toward 0.5 since each dimension's last signal\n\n", timestamp.Format(when))
			writeScores(e.stdout, dims, domains)
			return nil
		}
	},
}

func orEmpty(v []reputation.View) []reputation.View {
	if v == nil {
		return []reputation.View{}
	}
	return v
}

// showUnknown answers for an agent with no profile: unknown, never 0.
func showUnknown(e *env, asJSON bool, agent string, when time.Time) error {
	var dims []reputation.View
	for _, name := range reputation.StandardDimensions {
		dims = append(dims, reputation.View{Name: name})
	}
	if asJSON {
		return writeJSON(e, struct {
			Agent      string            `json:"agent"`
			Known      bool              `json:"known"`
			At         string            `json:"at"`
			Signals    int               `json:"signals"`
			Dimensions []reputation.View `json:"dimensions"`
			Domains    []reputation.View `json:"domains"`
		}{agent, false, timestamp.Format(when), 0, dims, []reputation.View{}})
	}
	fmt.Fprintf(e.stdout, "%s is unknown: this workspace has no signals about it (unknown is not untrusted)\n\n", agent)
	writeScores(e.stdout, dims, nil)
	return nil
}

// writeScores prints one line per dimension and domain.
func writeScores(w io.Writer, dims, domains []reputation.View) {
	fmt.Fprintf(w, "%-24s %7s %6s %6s  %s\n", "DIMENSION", "SCORE", "CONF", "N", "")
	line := func(label string, v reputation.View) {
		if !v.Known {
			fmt.Fprintf(w, "%-24s %7s %6s %6d\n", shorten(label, 24), "unknown", "-", 0)
			return
		}
		fmt.Fprintf(w, "%-24s %7s %6.2f %6d  %s\n", shorten(label, 24), fmtScore(v.Score), v.Confidence, v.SampleSize, bar(v.Score))
	}
	for _, v := range dims {
		line(v.Name, v)
	}
	for _, v := range domains {
		line("domain "+v.Name, v)
	}
}

var reputationListCmd = &command{
	name:    "list",
	args:    "[--dimension D | --domain X] [--at TIME] [--workspace DIR] [--json]",
	summary: "rank every profiled agent by a dimension's decayed score (unknown last)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		dimension := fs.String("dimension", reputation.Reliability, "the dimension to rank by")
		domain := fs.String("domain", "", "rank by competence in this domain instead")
		at := fs.String("at", "", "read the scores as of this RFC 3339 time (default: now)")
		dir := workspaceFlag(fs)
		asJSON := fs.Bool("json", false, "print JSON")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if *domain != "" && fs.Changed("dimension") {
				return usagef("give --dimension or --domain, not both")
			}
			when, err := atFlag(*at)
			if err != nil {
				return err
			}
			w, err := openWorkspace(*dir)
			if err != nil {
				return err
			}
			profiles, err := w.Profiles()
			if err != nil {
				return repError(err)
			}
			type row struct {
				Rank  int             `json:"rank,omitempty"`
				Agent string          `json:"agent"`
				Name  string          `json:"name"`
				Score reputation.View `json:"score"`
			}
			rows := make([]row, 0, len(profiles))
			label := *dimension
			for _, p := range profiles {
				v := p.Score(*dimension, when)
				if *domain != "" {
					v, label = p.DomainScore(*domain, when), "domain "+*domain
				}
				rows = append(rows, row{Agent: p.AgentDID, Name: p.AgentName, Score: v})
			}
			sort.SliceStable(rows, func(i, j int) bool {
				a, b := rows[i].Score, rows[j].Score
				switch {
				case a.Known != b.Known:
					return a.Known
				case a.Score != b.Score:
					return a.Score > b.Score
				case a.Confidence != b.Confidence:
					return a.Confidence > b.Confidence
				}
				return rows[i].Name < rows[j].Name
			})
			for i := range rows {
				if rows[i].Score.Known {
					rows[i].Rank = i + 1
				}
			}
			if *asJSON {
				return writeJSON(e, struct {
					By     string `json:"by"`
					At     string `json:"at"`
					Agents []row  `json:"agents"`
				}{label, timestamp.Format(when), rows})
			}
			if len(rows) == 0 {
				fmt.Fprintf(e.stdout, "no reputation profiles in %s\n", *dir)
				return nil
			}
			fmt.Fprintf(e.stdout, "ranked by %s as of %s\n\n", label, timestamp.Format(when))
			fmt.Fprintf(e.stdout, "%4s %7s %6s %6s  %-10s  %s\n", "#", "SCORE", "CONF", "N", "", "AGENT")
			for _, r := range rows {
				name := r.Agent
				if r.Name != r.Agent {
					name = shorten(r.Name, 32) + "  " + r.Agent
				}
				if !r.Score.Known {
					fmt.Fprintf(e.stdout, "%4s %7s %6s %6d  %-10s  %s\n", "-", "unknown", "-", 0, "", name)
					continue
				}
				fmt.Fprintf(e.stdout, "%4d %7s %6.2f %6d  %s  %s\n", r.Rank, fmtScore(r.Score.Score), r.Score.Confidence, r.Score.SampleSize, bar(r.Score.Score), name)
			}
			return nil
		}
	},
}
