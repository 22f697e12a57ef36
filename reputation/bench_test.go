package reputation

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// bigProfile writes a profile of n reliability signals for agent, laid out
// as this package writes them, and returns its slug.
func bigProfile(tb testing.TB, w *Workspace, agent, source string, n int) string {
	tb.Helper()
	p := &Profile{AgentDID: agent, AgentName: "busy"}
	p.Slug, _ = AgentSlug(agent)
	var b strings.Builder
	for i := range n {
		s := Signal{Source: source, Dimension: Reliability, Score: float64(i%10) / 10, Timestamp: t0.Add(time.Duration(i) * time.Minute),
			Evidence: fmt.Sprintf("contract:del-%012x", i), Message: "Contract evaluation: summarize the weekly notes"}
		p.apply(s)
		fmt.Fprintf(&b, "  - source: %q\n    dimension: %q\n    score: %s\n    timestamp: %q\n    evidence: %q\n    message: %q\n",
			s.Source, s.Dimension, floatNode(s.Score).Value, timeNode(s.Timestamp).Value, s.Evidence, s.Message)
	}
	doc := newProfileDocument(p)
	setState(doc, p, p.Signals[len(p.Signals)-1:])
	head, err := doc.encode()
	if err != nil {
		tb.Fatal(err)
	}
	text := strings.Replace(string(head), "signals: []\n", "signals:\n"+b.String(), 1)
	writeWS(tb, w, "reputation/"+p.Slug+".md", text)
	return p.Slug
}

// A profile of 10,000 signals loads and takes a new one.
func TestTenThousandSignals(t *testing.T) {
	w := testWorkspace(t)
	agent, src := testKey(t, 1), testKey(t, 2)
	bigProfile(t, w, agent.DID(), src.DID(), 10_000)
	before, err := w.Profile(agent.ID())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p, err := w.Record(agent.ID(), "", sig(src.ID(), 1, t0.Add(365*24*time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded the 10,001st signal in %v", time.Since(start))
	if len(p.Signals) != 10_001 || p.Dimensions[Reliability].SampleSize != 10_001 {
		t.Fatalf("%d signals, sample size %d", len(p.Signals), p.Dimensions[Reliability].SampleSize)
	}
	after, err := w.Profile(agent.ID())
	if err != nil || len(after.Signals) != 10_001 || after.Signals[9_999] != before.Signals[9_999] {
		t.Fatalf("%v", err)
	}
}

// BenchmarkRecord10k measures recording one signal into a profile of
// 10,000 through one Workspace, as the proxy records: lock, then (with
// the profile as the last record left it) append one line to its signal
// log and fsync it; every 256 records fold the log into the profile.
func BenchmarkRecord10k(b *testing.B) {
	w := testWorkspace(b)
	agent, src := testKey(b, 1), testKey(b, 2)
	bigProfile(b, w, agent.DID(), src.DID(), 10_000)
	s := sig(src.ID(), 1, t0.Add(365*24*time.Hour))
	b.ResetTimer()
	cpu := cpuTime()
	for b.Loop() {
		if _, err := w.Record(agent.ID(), "", s); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}

// BenchmarkRecord10kCold is BenchmarkRecord10k in a new Workspace each
// time, as each delegateos command is: nothing is cached.
func BenchmarkRecord10kCold(b *testing.B) {
	w := testWorkspace(b)
	agent, src := testKey(b, 1), testKey(b, 2)
	bigProfile(b, w, agent.DID(), src.DID(), 10_000)
	s := sig(src.ID(), 1, t0.Add(365*24*time.Hour))
	b.ResetTimer()
	cpu := cpuTime()
	for b.Loop() {
		fresh, err := Open(w.Dir())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := fresh.Record(agent.ID(), "", s); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}

// BenchmarkLoad10k measures reading a profile of 10,000 signals, as
// reputation show does.
func BenchmarkLoad10k(b *testing.B) {
	w := testWorkspace(b)
	agent, src := testKey(b, 1), testKey(b, 2)
	bigProfile(b, w, agent.DID(), src.DID(), 10_000)
	b.ResetTimer()
	cpu := cpuTime()
	for b.Loop() {
		if _, err := w.Profile(agent.ID()); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}

// BenchmarkTrust10k measures the trust gate's read of an unchanged profile
// of 10,000 signals (a stat and a cache hit).
func BenchmarkTrust10k(b *testing.B) {
	w := testWorkspace(b)
	agent, src := testKey(b, 1), testKey(b, 2)
	bigProfile(b, w, agent.DID(), src.DID(), 10_000)
	if _, err := w.Trust(agent.ID(), t0); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu := cpuTime()
	for b.Loop() {
		if _, err := w.Trust(agent.ID(), t0); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}

// BenchmarkRecordSmall measures recording into a new agent's small profile.
func BenchmarkRecordSmall(b *testing.B) {
	w := testWorkspace(b)
	agent, src := testKey(b, 1), testKey(b, 2)
	bigProfile(b, w, agent.DID(), src.DID(), 10)
	s := sig(src.ID(), 1, t0)
	b.ResetTimer()
	cpu := cpuTime()
	for b.Loop() {
		if _, err := w.Record(agent.ID(), "", s); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}
