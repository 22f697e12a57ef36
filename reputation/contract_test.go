package reputation

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Appendix A.2: 0.3×0.90 + 0.4×0.85 + 0.2×0.80 + 0.1×1.00 = 0.87.
func TestWeightedScoreSpecExample(t *testing.T) {
	got, err := WeightedScore(
		map[string]float64{Completeness: 0.3, Accuracy: 0.4, Clarity: 0.2, Timeliness: 0.1},
		map[string]float64{Completeness: 0.90, Accuracy: 0.85, Clarity: 0.80, Timeliness: 1.00},
	)
	if err != nil || got != 0.87 {
		t.Fatalf("WeightedScore = %v, %v; want 0.87", got, err)
	}
}

func TestWeightedScoreRefuses(t *testing.T) {
	crit := DefaultCriteria()
	full := map[string]float64{Completeness: 1, Accuracy: 1, Clarity: 1, Timeliness: 1}
	with := func(k string, v float64) map[string]float64 {
		m := map[string]float64{}
		for a, b := range full {
			m[a] = b
		}
		m[k] = v
		return m
	}
	without := func(k string) map[string]float64 {
		m := with(k, 0)
		delete(m, k)
		return m
	}
	for name, c := range map[string]struct {
		crit, scores map[string]float64
		want         string
	}{
		"missing score":    {crit, without(Clarity), "no score for [clarity]"},
		"extra score":      {crit, with("style", 1), `"style" is not one of`},
		"score above 1":    {crit, with(Accuracy, 1.01), "outside [0, 1]"},
		"score negative":   {crit, with(Accuracy, -0.01), "outside [0, 1]"},
		"score NaN":        {crit, with(Accuracy, math.NaN()), "outside [0, 1]"},
		"weights sum 0.9":  {map[string]float64{"a": 0.5, "b": 0.4}, map[string]float64{"a": 1, "b": 1}, "sum to 0.9"},
		"weights sum 1.2":  {map[string]float64{"a": 0.6, "b": 0.6}, map[string]float64{"a": 1, "b": 1}, "sum to 1.2"},
		"no criteria":      {map[string]float64{}, map[string]float64{}, "no evaluation criteria"},
		"nil criteria":     {nil, full, "no evaluation criteria"},
		"thirds too short": {map[string]float64{"a": 0.33, "b": 0.33, "c": 0.33}, map[string]float64{"a": 1, "b": 1, "c": 1}, "sum to 0.99"},
	} {
		_, err := WeightedScore(c.crit, c.scores)
		if !errors.Is(err, ErrEvaluation) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrEvaluation mentioning %q", name, err, c.want)
		}
	}
	// Floating-point sums within the tolerance are fine, and the result
	// stays within [0, 1].
	got, err := WeightedScore(map[string]float64{"a": 0.1, "b": 0.2, "c": 0.7}, map[string]float64{"a": 1, "b": 1, "c": 1})
	if err != nil || got != 1 {
		t.Fatalf("%v, %v", got, err)
	}
}

func newTestContract(t *testing.T, w *Workspace, slug string, mod func(*ContractParams)) *Contract {
	t.Helper()
	p := ContractParams{
		Slug: slug, Delegator: testKey(t, 10).ID(), Delegate: testKey(t, 11).ID(),
		Task: Task{Description: "Research Q3 trends"}, Created: t0, Deadline: t0.Add(72 * time.Hour),
	}
	if mod != nil {
		mod(&p)
	}
	c, err := w.CreateContract(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var specScores = map[string]float64{Completeness: 0.90, Accuracy: 0.85, Clarity: 0.80, Timeliness: 1.00}

// The lifecycle goes draft → active → completed → evaluated, one step at a
// time, never back, and each refusal leaves the file as it was.
func TestLifecycle(t *testing.T) {
	w := testWorkspace(t)
	c := newTestContract(t, w, "q3-research", nil)
	if c.Status != Draft || c.Result != nil {
		t.Fatalf("new contract: %+v", c)
	}
	refuse := func(step string, from, to Status, f func() error) {
		t.Helper()
		before := readWS(t, w, "contracts/q3-research.md")
		err := f()
		var te *TransitionError
		if !errors.As(err, &te) || !errors.Is(err, ErrTransition) || te.From != from || te.To != to {
			t.Fatalf("%s: %v, want a TransitionError %s → %s", step, err, from, to)
		}
		if after := readWS(t, w, "contracts/q3-research.md"); after != before {
			t.Fatalf("%s: a refused step changed the file", step)
		}
	}
	evaluate := func() error { _, _, err := w.Evaluate("q3-research", specScores, "", t0); return err }
	complete := func() error { _, err := w.Complete("q3-research"); return err }
	activate := func() error { _, err := w.Activate("q3-research"); return err }

	refuse("evaluate a draft", Draft, Evaluated, evaluate)
	refuse("complete a draft", Draft, Completed, complete)
	if err := activate(); err != nil {
		t.Fatal(err)
	}
	refuse("activate twice", Active, Active, activate)
	refuse("evaluate an active contract", Active, Evaluated, evaluate)
	if err := complete(); err != nil {
		t.Fatal(err)
	}
	refuse("back to active", Completed, Active, activate)
	refuse("complete twice", Completed, Completed, complete)
	if err := evaluate(); err != nil {
		t.Fatal(err)
	}
	refuse("evaluate twice", Evaluated, Evaluated, evaluate)
	refuse("back to completed", Evaluated, Completed, complete)
	refuse("back to active", Evaluated, Active, activate)

	got, err := w.Contract("contract:q3-research")
	if err != nil || got.Status != Evaluated || !reflect.DeepEqual(got.Result, specScores) {
		t.Fatalf("%+v, %v", got, err)
	}
	var te *TransitionError
	errors.As(evaluate(), &te)
	if msg := te.Error(); !strings.Contains(msg, "it must be completed to become evaluated") {
		t.Errorf("message: %s", msg)
	}
}

// Evaluating the spec's example records a 0.87 reliability signal in the
// delegate's profile, with the contract as evidence and the delegator as
// source; the contract file holds the result.
func TestEvaluateGeneratesReliabilitySignal(t *testing.T) {
	w := testWorkspace(t)
	c := newTestContract(t, w, "q3-research", nil)
	mustStep(t, w, c.Slug)
	at := t0.Add(48 * time.Hour)
	got, signals, err := w.Evaluate(c.Slug, specScores, "", at)
	if err != nil {
		t.Fatal(err)
	}
	want := Signal{Source: testKey(t, 10).DID(), Dimension: Reliability, Score: 0.87, Timestamp: at, Evidence: "contract:q3-research", Message: "Contract evaluation: Research Q3 trends"}
	if len(signals) != 1 || signals[0] != want {
		t.Fatalf("signals %+v\nwant %+v", signals, want)
	}
	p, err := w.Profile(testKey(t, 11).ID())
	if err != nil {
		t.Fatal(err)
	}
	if p.Slug != got.DelegateSlug || len(p.Signals) != 1 || p.Signals[0] != want {
		t.Fatalf("profile %+v", p)
	}
	if v := p.Score(Reliability, at); !v.Known || v.Raw != 0.87 || v.SampleSize != 1 {
		t.Fatalf("reliability %+v", v)
	}
	text := readWS(t, w, "contracts/q3-research.md")
	for _, s := range []string{`status: "evaluated"`, "result:\n    completeness: 0.9\n    accuracy: 0.85\n    clarity: 0.8\n    timeliness: 1.0\n"} {
		if !strings.Contains(text, s) {
			t.Errorf("contract lacks %q:\n%s", s, text)
		}
	}
	// Another evaluator can be named.
	c2 := newTestContract(t, w, "second", nil)
	mustStep(t, w, c2.Slug)
	_, signals, err = w.Evaluate(c2.Slug, specScores, testKey(t, 12).ID(), at)
	if err != nil || signals[0].Source != testKey(t, 12).DID() {
		t.Fatalf("%+v, %v", signals, err)
	}
	if _, _, err := w.Evaluate(newTestContractDone(t, w, "third"), specScores, "not a did", at); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad source: %v", err)
	}
}

func newTestContractDone(t *testing.T, w *Workspace, slug string) string {
	c := newTestContract(t, w, slug, nil)
	mustStep(t, w, slug)
	return c.Slug
}

// A knowledge-artifact output also rates domain competence: one signal per
// tag of the artifact, else task.domain; other outputs rate none.
func TestEvaluateDomainSignals(t *testing.T) {
	w := testWorkspace(t)
	writeWS(t, w, "artifacts/q3-report.md", "---\ntype: knowledge-artifact\ntags: [AI Research, market-analysis, ai-research]\n---\n# Report\n")
	writeWS(t, w, "artifacts/untagged.md", "---\ntype: knowledge-artifact\n---\n")
	writeWS(t, w, "artifacts/broken.md", "---\ntags: {a: 1}\n---\n")
	cases := []struct {
		slug string
		task Task
		want []string // domains
		err  bool
	}{
		{"tagged", Task{Description: "d", OutputFormat: KnowledgeArtifact, OutputSlug: "q3-report", Domain: "ignored"}, []string{"ai-research", "market-analysis"}, false},
		{"untagged", Task{Description: "d", OutputFormat: KnowledgeArtifact, OutputSlug: "untagged", Domain: "law"}, []string{"law"}, false},
		{"missing-artifact", Task{Description: "d", OutputFormat: KnowledgeArtifact, OutputSlug: "nope", Domain: "law"}, []string{"law"}, false},
		{"no-domain", Task{Description: "d", OutputFormat: KnowledgeArtifact}, nil, false},
		{"code", Task{Description: "d", OutputFormat: "code", Domain: "law"}, nil, false},
		{"broken-artifact", Task{Description: "d", OutputFormat: KnowledgeArtifact, OutputSlug: "broken"}, nil, true},
	}
	for _, c := range cases {
		t.Run(c.slug, func(t *testing.T) {
			newTestContract(t, w, c.slug, func(p *ContractParams) { p.Task = c.task })
			mustStep(t, w, c.slug)
			_, signals, err := w.Evaluate(c.slug, specScores, "", t0)
			if c.err {
				if err == nil {
					t.Fatal("evaluated despite an unreadable artifact")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var domains []string
			for _, s := range signals[1:] {
				if s.Dimension != DomainCompetence || s.Score != 0.87 || s.Evidence != "contract:"+c.slug {
					t.Fatalf("domain signal %+v", s)
				}
				domains = append(domains, s.Domain)
			}
			if signals[0].Dimension != Reliability || !reflect.DeepEqual(domains, c.want) {
				t.Fatalf("signals %+v, want domains %v", signals, c.want)
			}
		})
	}
	p, err := w.Profile(testKey(t, 11).ID())
	if err != nil {
		t.Fatal(err)
	}
	if v := p.DomainScore("ai-research", t0); !v.Known || v.Raw != 0.87 {
		t.Fatalf("ai-research %+v", v)
	}
	if v := p.DomainScore("law", t0); v.SampleSize != 2 {
		t.Fatalf("law %+v", v)
	}
}

func TestCreateContractRefuses(t *testing.T) {
	w := testWorkspace(t)
	good := func() ContractParams {
		return ContractParams{Slug: "ok", Delegator: testKey(t, 10).ID(), Delegate: testKey(t, 11).ID(), Task: Task{Description: "x"}, Created: t0}
	}
	for name, c := range map[string]struct {
		mod  func(*ContractParams)
		want error
	}{
		"path traversal":     {func(p *ContractParams) { p.Slug = "../reputation/x" }, ErrInvalid},
		"dot slug":           {func(p *ContractParams) { p.Slug = ".." }, ErrInvalid},
		"upper case":         {func(p *ContractParams) { p.Slug = "Q3" }, ErrInvalid},
		"empty slug":         {func(p *ContractParams) { p.Slug = "" }, ErrInvalid},
		"leading hyphen":     {func(p *ContractParams) { p.Slug = "-x" }, ErrInvalid},
		"long slug":          {func(p *ContractParams) { p.Slug = strings.Repeat("a", MaxSlugLen+1) }, ErrInvalid},
		"weights":            {func(p *ContractParams) { p.Criteria = map[string]float64{"a": 0.5} }, ErrEvaluation},
		"weight range":       {func(p *ContractParams) { p.Criteria = map[string]float64{"a": 1.5, "b": -0.5} }, ErrInvalid},
		"criterion name":     {func(p *ContractParams) { p.Criteria = map[string]float64{"Bad Name": 1} }, ErrInvalid},
		"no description":     {func(p *ContractParams) { p.Task.Description = "" }, ErrInvalid},
		"control characters": {func(p *ContractParams) { p.Task.Description = "x\x1b[2J" }, ErrInvalid},
		"bad delegator":      {func(p *ContractParams) { p.Delegator = "alice" }, ErrInvalid},
		"bad delegate":       {func(p *ContractParams) { p.Delegate = "did:web:example.com" }, ErrUnsupportedAgent},
		"slug as delegate":   {func(p *ContractParams) { p.Delegate = "bob" }, ErrInvalid},
		"no time":            {func(p *ContractParams) { p.Created = time.Time{} }, ErrInvalid},
		"bad output slug":    {func(p *ContractParams) { p.Task.OutputSlug = "../../etc/passwd" }, ErrInvalid},
		"bad domain":         {func(p *ContractParams) { p.Task.Domain = "Law & Order" }, ErrInvalid},
		"threshold":          {func(p *ContractParams) { p.Constraints = &Constraints{ConfidenceThreshold: ptr(2.0)} }, ErrInvalid},
		"link with slug":     {func(p *ContractParams) { p.DelegationID = "del_0123456789ab" }, ErrInvalid},
		"task contract only": {func(p *ContractParams) { p.TaskContractID = "ct_0123456789ab" }, ErrInvalid},
	} {
		p := good()
		c.mod(&p)
		if _, err := w.CreateContract(p); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if _, err := w.CreateContract(good()); err != nil {
		t.Fatal(err)
	}
	if _, err := w.CreateContract(good()); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	// A linked contract takes its slug from the delegation.
	p := good()
	p.Slug, p.DelegationID, p.TaskContractID = "", "del_0123456789ab", "ct_0123456789ab"
	c, err := w.CreateContract(p)
	if err != nil || c.Slug != "del-0123456789ab" || c.Link.DelegationID != "del_0123456789ab" {
		t.Fatalf("%+v, %v", c, err)
	}
}

// A contract as the reference tool writes it (its status and awp version
// differ) loads, and our writes keep its unknown fields.
const foreignContract = `---
awp: 0.4.0
rdp: '1.0'
type: delegation-contract
id: 'contract:draft-coverage-report'
status: completed
delegator: 'did:key:z6Mkq5UdbbWW6NGyzJmEZiUNBkz3NWbi3dFuSMqmjsKntg9c'
delegate: 'did:key:zScribeBotPlaceholder'
delegateSlug: scribe-bot
created: '2026-05-12T16:55:47.027Z'
task:
  description: >-
    Draft the final MCP coverage-sweep report as a knowledge artifact
    summarizing findings, gaps, and tool surface.
  outputFormat: knowledge-artifact
  outputSlug: mcp-coverage-report
  priority: high
evaluation:
  criteria:
    completeness: 0.35
    accuracy: 0.4
    clarity: 0.2
    timeliness: 0.05
  result: null
  reviewer: ops
deadline: '2026-05-19T17:00:00Z'
x-tracking: {ticket: 42}
---

# draft-coverage-report — Delegation Contract
`

func TestForeignContract(t *testing.T) {
	w := testWorkspace(t)
	writeWS(t, w, "contracts/draft-coverage-report.md", foreignContract)
	writeWS(t, w, "artifacts/mcp-coverage-report.md", "---\ntags: [mcp]\n---\n")
	c, err := w.Contract("draft-coverage-report")
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != Completed || c.DelegateSlug != "scribe-bot" || !c.Deadline.Equal(time.Date(2026, 5, 19, 17, 0, 0, 0, time.UTC)) ||
		!strings.HasPrefix(c.Task.Description, "Draft the final MCP coverage-sweep report as a knowledge artifact summarizing") {
		t.Fatalf("%+v", c)
	}
	// Its delegate is not an Ed25519 key, but the contract names the
	// profile slug, so evaluating it creates scribe-bot.md.
	_, signals, err := w.Evaluate(c.Slug, map[string]float64{Completeness: 0.85, Accuracy: 0.9, Clarity: 0.8, Timeliness: 1}, "", t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(signals) != 2 || signals[0].Score != 0.8675 || signals[1].Domain != "mcp" {
		t.Fatalf("%+v", signals)
	}
	p, err := w.Profile("did:key:zScribeBotPlaceholder")
	if err != nil || p.Slug != "scribe-bot" || p.AgentName != "scribe-bot" {
		t.Fatalf("%+v, %v", p, err)
	}
	text := readWS(t, w, "contracts/draft-coverage-report.md")
	for _, s := range []string{"priority: high", "reviewer: ops", "x-tracking: {ticket: 42}", "awp: 0.4.0", "  result:\n    completeness: 0.85\n"} {
		if !strings.Contains(text, s) {
			t.Errorf("rewritten contract lacks %q:\n%s", s, text)
		}
	}
}

// The rules of §6.2, each broken once.
func TestContractRules(t *testing.T) {
	ok := strings.Replace(foreignContract, "status: completed", "status: draft", 1)
	if _, err := ParseContract([]byte(ok), "draft-coverage-report"); err != nil {
		t.Fatal(err)
	}
	sub := func(old, new string) string {
		if !strings.Contains(ok, old) {
			t.Fatalf("%q not in the contract", old)
		}
		return strings.Replace(ok, old, new, 1)
	}
	evaluated := strings.Replace(ok, "status: draft", "status: evaluated", 1)
	for _, c := range []struct{ name, content, want string }{
		{"type", sub("type: delegation-contract", "type: reputation-profile"), `type: must be "delegation-contract"`},
		{"id", sub("id: 'contract:draft-coverage-report'", "id: 'draft-coverage-report'"), "id: must be"},
		{"id of another file", sub("id: 'contract:draft-coverage-report'", "id: 'contract:other'"), "id: must be"},
		{"status", sub("status: draft", "status: done"), "not one of draft, active, completed, evaluated"},
		{"delegator", sub("delegator: 'did:key:z6Mkq5UdbbWW6NGyzJmEZiUNBkz3NWbi3dFuSMqmjsKntg9c'", "delegator: alice"), "delegator"},
		{"delegate", sub("delegate: 'did:key:zScribeBotPlaceholder'", "delegate: 'did:key:'"), "delegate"},
		{"delegateSlug", sub("delegateSlug: scribe-bot", "delegateSlug: ../scribe"), "delegateSlug"},
		{"created", sub("created: '2026-05-12T16:55:47.027Z'", "created: soon"), "created"},
		{"deadline", sub("deadline: '2026-05-19T17:00:00Z'", "deadline: 42"), "deadline"},
		{"task missing", strings.Replace(ok, "task:\n", "tusk:\n", 1), "task: is required"},
		{"description missing", sub("  description: >-", "  summary: >-"), "task.description: is required"},
		{"criteria missing", sub("  criteria:", "  weights:"), "evaluation.criteria: is required"},
		{"weight out of range", sub("accuracy: 0.4", "accuracy: 1.4"), "evaluation.criteria.accuracy"},
		{"result before evaluation", sub("result: null", "result: {completeness: 1}"), "must be null until the contract is evaluated"},
		{"evaluated without result", evaluated, "must score every criterion"},
		{"evaluated with missing scores", strings.Replace(evaluated, "result: null", "result: {completeness: 1, accuracy: 1}", 1), `criterion "clarity" has no score`},
		{"result score out of range", strings.Replace(evaluated, "result: null", "result: {completeness: 1, accuracy: 1, clarity: 1, timeliness: 7}", 1), "evaluation.result.timeliness"},
		{"scope not a list", sub("deadline:", "scope: {include: yes}\ndeadline:"), "scope.include"},
		{"constraint type", sub("deadline:", "constraints: {requireCitations: maybe}\ndeadline:"), "requireCitations"},
		{"output slug", sub("outputSlug: mcp-coverage-report", "outputSlug: ../../etc/passwd"), "task.outputSlug"},
		{"link to another slug", sub("deadline:", "delegateos: {delegationId: del_0123456789ab}\ndeadline:"), `must be named "del-0123456789ab"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseContract([]byte(c.content), "draft-coverage-report")
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v, want a problem mentioning %q", err, c.want)
			}
		})
	}
	// Weights that do not sum to 1.0 break a SHOULD: the file loads with a
	// warning, but it cannot be evaluated.
	w := testWorkspace(t)
	writeWS(t, w, "contracts/draft-coverage-report.md", strings.NewReplacer("status: draft", "status: completed", "timeliness: 0.05", "timeliness: 0.5").Replace(ok))
	if _, err := w.Contract("draft-coverage-report"); err != nil {
		t.Fatal(err)
	}
	report, err := w.Validate()
	if err != nil || len(report.Problems) != 1 || report.Errors() != 0 || !strings.Contains(report.Problems[0].Message, "sum to 1.45") {
		t.Fatalf("%+v, %v", report, err)
	}
	_, _, err = w.Evaluate("draft-coverage-report", map[string]float64{Completeness: 1, Accuracy: 1, Clarity: 1, Timeliness: 1}, "", t0)
	if !errors.Is(err, ErrEvaluation) {
		t.Fatalf("evaluated with weights summing to 1.45: %v", err)
	}
}

// A contract file's fields survive a round trip through our writer.
func TestContractRoundTrip(t *testing.T) {
	w := testWorkspace(t)
	c := newTestContract(t, w, "full", func(p *ContractParams) {
		p.Task = Task{Description: "line one\nline two", OutputFormat: KnowledgeArtifact, OutputSlug: "out", Domain: "law"}
		p.Scope = &Scope{Include: []string{"a", "b"}, Exclude: []string{"c"}}
		p.Constraints = &Constraints{RequireCitations: ptr(true), ConfidenceThreshold: ptr(0.7)}
		p.Criteria = map[string]float64{"accuracy": 0.5, "citations": 0.5}
	})
	got, err := w.Contract("full")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("read back %+v\nwrote %+v", got, c)
	}
	if names := got.CriteriaNames(); !reflect.DeepEqual(names, []string{"accuracy", "citations"}) {
		t.Fatalf("%v", names)
	}
}

// An artifact with many tags rates at most MaxDomainSignals domains.
func TestEvaluateDomainLimit(t *testing.T) {
	w := testWorkspace(t)
	var tags []string
	for i := range MaxDomainSignals + 4 {
		tags = append(tags, fmt.Sprintf("topic-%d", i))
	}
	writeWS(t, w, "artifacts/many.md", "---\ntags: ["+strings.Join(tags, ", ")+"]\n---\n")
	newTestContract(t, w, "many", func(p *ContractParams) {
		p.Task = Task{Description: "d", OutputFormat: KnowledgeArtifact, OutputSlug: "many"}
	})
	mustStep(t, w, "many")
	_, signals, err := w.Evaluate("many", specScores, "", t0)
	if err != nil || len(signals) != 1+MaxDomainSignals {
		t.Fatalf("%d signals, %v", len(signals), err)
	}
}

func TestCreateContractCriteriaLimit(t *testing.T) {
	w := testWorkspace(t)
	crit := map[string]float64{}
	for i := range MaxCriteria + 1 {
		crit[fmt.Sprintf("c%d", i)] = 1.0 / float64(MaxCriteria+1)
	}
	_, err := w.CreateContract(ContractParams{Slug: "x", Delegator: testKey(t, 1).ID(), Delegate: testKey(t, 2).ID(), Task: Task{Description: "d"}, Criteria: crit, Created: t0})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("%v", err)
	}
}

// A rewrite never changes a value it does not set, even where yaml.v3
// cannot write the original block style back (a folded scalar that starts
// with an empty line).
func TestRewriteKeepsBlockScalarValues(t *testing.T) {
	w := testWorkspace(t)
	content := strings.NewReplacer(
		"draft-coverage-report", "folded", "status: completed", "status: draft",
		"  description: >-\n", "  description: >\n\n   leading empty line\n  note: |2\n     indented first line\n  old: >-\n",
	).Replace(foreignContract)
	writeWS(t, w, "contracts/folded.md", content)
	before, err := w.Contract("folded")
	if err != nil {
		t.Fatal(err)
	}
	beforeDoc, _ := parseDocument([]byte(content))
	if _, err := w.Activate("folded"); err != nil {
		t.Fatal(err)
	}
	after, err := w.Contract("folded")
	if err != nil || after.Task.Description != before.Task.Description || before.Task.Description != "\nleading empty line\n" {
		t.Fatalf("%q → %q (%v)", before.Task.Description, after.Task.Description, err)
	}
	afterDoc, _ := parseDocument([]byte(readWS(t, w, "contracts/folded.md")))
	for _, k := range []string{"note", "old"} {
		b, a := lookup(lookup(beforeDoc.root, "task"), k), lookup(lookup(afterDoc.root, "task"), k)
		if a == nil || a.Value != b.Value {
			t.Fatalf("task.%s changed from %q", k, b.Value)
		}
	}
}
