package reputation

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// specExampleA1 is Appendix A.1 of the RDP spec, verbatim.
const specExampleA1 = `---
awp: "0.3.0"
rdp: "1.0"
type: "reputation-profile"
id: "reputation:research-bot"
agentDid: "did:key:zResearchBot123"
agentName: "ResearchBot"
lastUpdated: "2026-02-15T10:30:00Z"
dimensions:
  reliability:
    score: 0.90
    confidence: 0.09
    sampleSize: 1
    lastSignal: "2026-02-15T10:30:00Z"
domainCompetence: {}
signals:
  - source: "did:key:zJarvis"
    dimension: "reliability"
    score: 0.90
    timestamp: "2026-02-15T10:30:00Z"
    message: "Completed first task successfully"
---

# ResearchBot — Reputation Profile

Tracked since 2026-02-15. New agent, limited data.
`

func TestSpecExampleProfileLoads(t *testing.T) {
	p, err := ParseProfile([]byte(specExampleA1), "research-bot")
	if err != nil {
		t.Fatal(err)
	}
	want := &Profile{
		Slug: "research-bot", AgentDID: "did:key:zResearchBot123", AgentName: "ResearchBot", LastUpdated: t0,
		Dimensions:       map[string]Dimension{Reliability: {Score: 0.9, Confidence: 0.09, SampleSize: 1, LastSignal: t0}},
		DomainCompetence: map[string]Dimension{},
		Signals:          []Signal{{Source: "did:key:zJarvis", Dimension: Reliability, Score: 0.9, Timestamp: t0, Message: "Completed first task successfully"}},
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("got  %+v\nwant %+v", p, want)
	}
	// The id must match the file it is in.
	if _, err := ParseProfile([]byte(specExampleA1), "other-bot"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "reputation:other-bot") {
		t.Fatalf("in other-bot.md: %v", err)
	}
}

// A profile written by another tool: quoted and unquoted values, unknown
// fields everywhere, comments, CRLF body.
const foreignProfile = `---
# kept by another tool
awp: 0.4.0
rdp: '1.0'
type: reputation-profile
id: reputation:scribe
agentDid: did:key:zScribeBotPlaceholder
agentName: Scribe
lastUpdated: 2026-02-15T10:30:00Z
x-team: {owner: ops, tier: 2}
dimensions:
  reliability: {score: 0.8, confidence: 0.09, sampleSize: 1, lastSignal: "2026-02-15T10:30:00Z", note: first}
  tone:
    score: 0.6
    confidence: 0.09
    sampleSize: 1
    lastSignal: 2026-02-15T10:30:00Z
signals:
- source: did:key:zJarvis
  dimension: reliability
  score: 0.8
  timestamp: 2026-02-15T10:30:00Z
  reviewer: {name: Ann}   # an unknown field inside a signal
-   source: did:key:zJarvis
    dimension: tone
    score: 0.6
    timestamp: "2026-02-15T10:30:00.000Z"

# trailing note about the list
extra: [1, 2, 3]
---
Body with CRLF line.` + "\r\n" + `Second line.` + "\r\n"

// Recording into a foreign profile keeps every field this package does not
// set, every signal as it was written, and the body byte for byte.
func TestRewriteKeepsUnknownFields(t *testing.T) {
	w := testWorkspace(t)
	writeWS(t, w, "reputation/scribe.md", foreignProfile)
	src := testKey(t, 9)
	p, err := w.Record("did:key:zScribeBotPlaceholder", "", sig(src.ID(), 0.4, t0.Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Slug != "scribe" || len(p.Signals) != 3 {
		t.Fatalf("recorded into %s with %d signals", p.Slug, len(p.Signals))
	}
	after := readWS(t, w, "reputation/scribe.md")
	// The old signals' text is untouched.
	start := strings.Index(foreignProfile, "- source: did:key:zJarvis")
	end := strings.Index(foreignProfile, "\n\n# trailing note")
	if !strings.Contains(after, foreignProfile[start:end+1]) {
		t.Fatalf("the existing signals were re-encoded:\n%s", after)
	}
	if !strings.HasSuffix(after, "---\nBody with CRLF line.\r\nSecond line.\r\n") {
		t.Fatalf("body changed:\n%q", after[strings.LastIndex(after, "---"):])
	}
	doc, err := parseDocument([]byte(after))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := doc.root.Decode(&got); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"awp":    "0.4.0",
		"x-team": map[string]any{"owner": "ops", "tier": 2},
		"extra":  []any{1, 2, 3},
	} {
		if !reflect.DeepEqual(got[key], want) {
			t.Errorf("%s = %#v, want %#v", key, got[key], want)
		}
	}
	rel := got["dimensions"].(map[string]any)["reliability"].(map[string]any)
	if rel["note"] != "first" || rel["sampleSize"] != 2 {
		t.Errorf("dimensions.reliability = %v", rel)
	}
	sigs := got["signals"].([]any)
	if r := sigs[0].(map[string]any)["reviewer"]; !reflect.DeepEqual(r, map[string]any{"name": "Ann"}) {
		t.Errorf("signals[0].reviewer = %v", r)
	}
	if !strings.Contains(after, "# kept by another tool") || !strings.Contains(after, "# trailing note about the list") {
		t.Errorf("comments lost:\n%s", after)
	}
	if _, err := ParseProfile([]byte(after), "scribe"); err != nil {
		t.Fatalf("rewritten file does not load: %v", err)
	}
}

// Every way of recording only appends: after each write the earlier
// signals are still there, equal and in order, and the text of the
// signals list as it was is still in the file.
func TestSignalsAreAppendOnly(t *testing.T) {
	w := testWorkspace(t)
	agent, observer, boss := testKey(t, 1), testKey(t, 2), testKey(t, 3)
	var prev []Signal
	var prevText string
	check := func(step string) {
		t.Helper()
		p, err := w.Profile(agent.ID())
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if len(p.Signals) <= len(prev) || len(prev) > 0 && !reflect.DeepEqual(p.Signals[:len(prev)], prev) {
			t.Fatalf("%s: signals before %+v\nafter %+v", step, prev, p.Signals)
		}
		text := readWS(t, w, "reputation/"+p.Slug+".md")
		if prevText != "" && !strings.Contains(text, prevText) {
			t.Fatalf("%s: the earlier signals' text changed", step)
		}
		i := strings.Index(text, "signals:\n")
		j := strings.LastIndex(text, "\n---\n")
		prevText = text[i : j+1]
		prev = p.Signals
	}
	at := t0
	for i := range 5 {
		at = at.Add(time.Hour)
		if _, err := w.Record(agent.ID(), "agent", sig(observer.ID(), float64(i)/5, at)); err != nil {
			t.Fatal(err)
		}
		check("Record")
	}
	if _, err := w.Record(agent.DID(), "", Signal{Source: observer.DID(), Dimension: DomainCompetence, Domain: "law", Score: 1, Timestamp: at}, Signal{Source: observer.DID(), Dimension: "tone", Score: 0.3, Timestamp: at, Message: "a\nb"}); err != nil {
		t.Fatal(err)
	}
	check("Record, two signals")
	if _, _, err := w.RecordOutcome(Outcome{DelegationID: "del_0123456789ab", Delegator: boss.ID(), Delegate: agent.ID(), Passed: true, Completeness: ptr(1.0), Clarity: ptr(1.0)}, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	check("RecordOutcome")
	c, err := w.CreateContract(ContractParams{Slug: "essay", Delegator: boss.ID(), Delegate: agent.ID(), Task: Task{Description: "write"}, Created: at})
	if err != nil {
		t.Fatal(err)
	}
	mustStep(t, w, c.Slug)
	if _, _, err := w.Evaluate(c.Slug, map[string]float64{Completeness: 0.9, Accuracy: 0.85, Clarity: 0.8, Timeliness: 1}, "", at.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	check("Evaluate")
}

// mustStep moves a draft contract to completed.
func mustStep(t *testing.T, w *Workspace, slug string) {
	t.Helper()
	if _, err := w.Activate(slug); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Complete(slug); err != nil {
		t.Fatal(err)
	}
}

// A file whose signals list is in flow style, or empty, is encoded in full;
// the signals must still all be there.
func TestAppendToFlowStyleSignals(t *testing.T) {
	for name, list := range map[string]string{
		"empty":  "signals: []\n",
		"flow":   `signals: [{source: "did:key:zA", dimension: reliability, score: 0.5, timestamp: "2026-02-15T10:30:00Z"}]` + "\n",
		"middle": "signals:\n  - {source: \"did:key:zA\", dimension: reliability, score: 0.5, timestamp: \"2026-02-15T10:30:00Z\"}\nlater: 1\n",
	} {
		t.Run(name, func(t *testing.T) {
			w := testWorkspace(t)
			head := strings.Split(specExampleA1, "signals:")[0]
			writeWS(t, w, "reputation/research-bot.md", head+list+"---\nbody\n")
			before, err := w.Profile("research-bot")
			if err != nil {
				t.Fatal(err)
			}
			p, err := w.Record("research-bot", "", sig("did:key:zJarvis", 0.7, t0.Add(time.Hour)))
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Signals) != len(before.Signals)+1 || !reflect.DeepEqual(p.Signals[:len(before.Signals)], before.Signals) {
				t.Fatalf("signals %+v", p.Signals)
			}
			again, err := w.Profile("research-bot")
			if err != nil || !reflect.DeepEqual(again.Signals, p.Signals) {
				t.Fatalf("reloaded: %v %+v", err, again)
			}
		})
	}
}

// parseProblems parses a profile and returns its error text.
func profileError(t *testing.T, content string) string {
	t.Helper()
	_, err := ParseProfile([]byte(content), "research-bot")
	if err == nil {
		return ""
	}
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("error does not wrap ErrInvalid: %v", err)
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("not a *ValidationError: %T", err)
	}
	return err.Error()
}

// Each change to the spec's example breaks one rule of §2, §3, §6 or of
// strict decoding, and is refused with a message naming it.
func TestProfileRulesAndStrictness(t *testing.T) {
	ex := specExampleA1
	sub := func(old, new string) string {
		if !strings.Contains(ex, old) {
			t.Fatalf("%q not in the example", old)
		}
		return strings.Replace(ex, old, new, 1)
	}
	for _, c := range []struct{ name, content, want string }{
		{"no front matter", "# just markdown\n", `does not start with a "---" line`},
		{"byte order mark", "\xef\xbb\xbf" + ex, "byte order mark"},
		{"no closing delimiter", strings.Split(ex, "\n---\n")[0], `no closing "---"`},
		{"empty front matter", "---\n---\nbody\n", "empty"},
		{"not a mapping", "---\n- a\n- b\n---\n", "not a mapping"},
		{"YAML syntax", sub(`agentName: "ResearchBot"`, `agentName: "ResearchBot`), "line"},
		{"two documents", sub("agentName:", "...\nagentName:"), "more than one document"},
		{"document end then delimiter", sub("agentName:", "...\n---\nagentName:"), "agentName: is required"},
		{"alias", sub(`agentName: "ResearchBot"`, `agentName: &n "ResearchBot"`+"\nnick: *n"), "anchors"},
		{"merge key", sub(`domainCompetence: {}`, "domainCompetence: {}\nbase: &b {a: 1}\nmore: {<<: *b}"), "anchors"},
		{"custom tag", sub(`agentName: "ResearchBot"`, `agentName: !python/name "ResearchBot"`), "tag"},
		{"binary tag", sub(`agentName: "ResearchBot"`, `agentName: !!binary "UmVzZWFyY2g="`), "tag"},
		{"duplicate key", sub(`agentName: "ResearchBot"`, "agentName: \"ResearchBot\"\nagentName: \"Evil\""), "appears twice"},
		{"duplicate key quoted", sub(`agentName: "ResearchBot"`, "agentName: \"ResearchBot\"\n\"agentName\": \"Evil\""), "appears twice"},
		{"duplicate signal key", sub(`    message:`, "    score: 0.1\n    message:"), "appears twice"},
		{"complex key", sub(`domainCompetence: {}`, "domainCompetence: {}\n? [a, b]\n: c"), "key"},
		{"deep nesting", sub(`domainCompetence: {}`, "domainCompetence: {}\nx: "+strings.Repeat("[", 40)+strings.Repeat("]", 40)), "deeper"},
		{"wrong type", sub(`type: "reputation-profile"`, `type: "delegation-contract"`), `type: must be "reputation-profile"`},
		{"id prefix", sub(`id: "reputation:research-bot"`, `id: "profile:research-bot"`), "id: must be"},
		{"rdp version", sub(`rdp: "1.0"`, `rdp: "2.0"`), "not supported"},
		{"rdp as number", sub(`rdp: "1.0"`, `rdp: 1.0`), "rdp: must be a string"},
		{"awp version", sub(`awp: "0.3.0"`, `awp: "three"`), "not an AWP version"},
		{"missing awp", sub("awp: \"0.3.0\"\n", ""), "awp: is required"},
		{"missing agentName", sub("agentName: \"ResearchBot\"\n", ""), "agentName: is required"},
		{"missing lastUpdated", sub("lastUpdated: \"2026-02-15T10:30:00Z\"\n", ""), "lastUpdated: is required"},
		{"missing signals", strings.Split(ex, "signals:")[0] + "---\n", "signals: is required"},
		{"signals not a list", sub("signals:\n", "signals: {}\nx:\n"), "signals: must be a list"},
		{"agentDid not a DID", sub(`agentDid: "did:key:zResearchBot123"`, `agentDid: "research-bot"`), "agentDid"},
		{"agentDid bad method", sub(`agentDid: "did:key:zResearchBot123"`, `agentDid: "did:Key:z1"`), "agentDid"},
		{"bad timestamp", sub(`lastUpdated: "2026-02-15T10:30:00Z"`, `lastUpdated: "yesterday"`), "lastUpdated"},
		{"date only", sub(`lastUpdated: "2026-02-15T10:30:00Z"`, `lastUpdated: 2026-02-15`), "lastUpdated"},
		{"dimension score above 1", sub("score: 0.90\n    confidence", "score: 1.5\n    confidence"), "dimensions.reliability.score"},
		{"dimension score negative", sub("score: 0.90\n    confidence", "score: -0.1\n    confidence"), "outside [0, 1]"},
		{"dimension score NaN", sub("score: 0.90\n    confidence", "score: .nan\n    confidence"), "finite"},
		{"dimension score string", sub("score: 0.90\n    confidence", "score: \"0.9\"\n    confidence"), "must be a number"},
		{"confidence above 1", sub("confidence: 0.09", "confidence: 9"), "confidence"},
		{"sampleSize negative", sub("sampleSize: 1", "sampleSize: -1"), "sampleSize"},
		{"sampleSize fraction", sub("sampleSize: 1", "sampleSize: 1.5"), "sampleSize"},
		{"sampleSize huge", sub("sampleSize: 1", "sampleSize: 99999999999999999999"), "sampleSize"},
		{"dimension not a mapping", sub("  reliability:\n    score: 0.90\n    confidence: 0.09\n    sampleSize: 1\n    lastSignal: \"2026-02-15T10:30:00Z\"\n", "  reliability: 0.9\n"), "must be a mapping"},
		{"signal missing source", sub(`  - source: "did:key:zJarvis"`+"\n    dimension", "  - dimension"), "signals[0].source: is required"},
		{"signal missing score", sub("    score: 0.90\n    timestamp", "    timestamp"), "signals[0].score: is required"},
		{"signal missing timestamp", sub("    timestamp: \"2026-02-15T10:30:00Z\"\n    message", "    message"), "signals[0].timestamp: is required"},
		{"signal source not a DID", sub(`source: "did:key:zJarvis"`, `source: "Jarvis"`), "signals[0].source"},
		{"signal score above 1", sub("    score: 0.90\n    timestamp", "    score: 2\n    timestamp"), "signals[0].score"},
		{"domain signal without domain", sub(`dimension: "reliability"`+"\n    score: 0.90\n    timestamp", `dimension: "domain-competence"`+"\n    score: 0.90\n    timestamp"), "signals[0].domain: is required"},
		{"signal not a mapping", sub("signals:\n", "signals:\n  - just text\n"), "signals[0]: must be a mapping"},
		{"control character", sub(`agentName: "ResearchBot"`, `agentName: "Research\x1b[31mBot"`), "control character"},
		{"escaped control character", sub(`agentName: "ResearchBot"`, `agentName: "Research\e[31mBot"`), "control character"},
		{"bidi override", sub(`agentName: "ResearchBot"`, "agentName: \"Research\u202eBot\""), "control character"},
		{"newline in name", sub(`agentName: "ResearchBot"`, `agentName: "Research\nBot"`), "control character"},
		{"huge name", sub(`agentName: "ResearchBot"`, `agentName: "`+strings.Repeat("x", MaxTextLen+1)+`"`), "longer than"},
		{"too large", ex + strings.Repeat("x", MaxFileSize), "larger than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := profileError(t, c.content)
			if got == "" {
				t.Fatalf("accepted:\n%s", c.content)
			}
			if !strings.Contains(got, c.want) {
				t.Fatalf("error %q does not mention %q", got, c.want)
			}
		})
	}
}

// Problems carry the file's line numbers.
func TestProblemLines(t *testing.T) {
	bad := strings.Replace(specExampleA1, "sampleSize: 1", "sampleSize: -1", 1)
	_, err := ParseProfile([]byte(bad), "research-bot")
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 {
		t.Fatalf("%v", err)
	}
	p := ve.Problems[0]
	if p.File != "reputation/research-bot.md" || p.Line != 13 || p.Field != "dimensions.reliability.sampleSize" {
		t.Fatalf("%+v", p)
	}
	if got := p.Error(); !strings.HasPrefix(got, "reputation/research-bot.md:13: dimensions.reliability.sampleSize: ") {
		t.Fatalf("%s", got)
	}
	syntax := strings.Replace(specExampleA1, `agentName: "ResearchBot"`, `agentName: "ResearchBot`, 1)
	_, err = ParseProfile([]byte(syntax), "research-bot")
	if err == nil || !strings.Contains(err.Error(), "line ") {
		t.Fatalf("%v", err)
	}
}

// All problems of a file are reported, not only the first.
func TestAllProblemsReported(t *testing.T) {
	bad := strings.NewReplacer("sampleSize: 1", "sampleSize: -1", `type: "reputation-profile"`, `type: "x"`, `source: "did:key:zJarvis"`, `source: "nobody"`).Replace(specExampleA1)
	_, err := ParseProfile([]byte(bad), "research-bot")
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 3 || len(ve.Unwrap()) != 3 {
		t.Fatalf("%v", err)
	}
}

// Unquoted timestamps (which YAML 1.1 readers tag !!timestamp) and any
// RFC 3339 offset are read as times.
func TestTimestampForms(t *testing.T) {
	for _, ts := range []string{`2026-02-15T10:30:00Z`, `"2026-02-15T11:30:00+01:00"`, `'2026-02-15T10:30:00.000Z'`} {
		content := strings.Replace(specExampleA1, `lastUpdated: "2026-02-15T10:30:00Z"`, "lastUpdated: "+ts, 1)
		p, err := ParseProfile([]byte(content), "research-bot")
		if err != nil || !p.LastUpdated.Equal(t0) {
			t.Errorf("%s: %v, %v", ts, p, err)
		}
	}
}

func TestCheckNodeRefusesAliasNodes(t *testing.T) {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("a: &x 1\nb: *x\n"), &n); err != nil {
		t.Fatal(err)
	}
	if err := checkNode(n.Content[0], 1); err == nil {
		t.Fatal("alias accepted")
	}
}
