package reputation

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// record gives agent n reliability signals of the given score.
func record(t *testing.T, w *Workspace, agent string, n int, score float64, at time.Time) {
	t.Helper()
	src := testKey(t, 99).ID()
	for i := 0; i < n; i += MaxSignalsPerRecord {
		var batch []Signal
		for j := i; j < n && j < i+MaxSignalsPerRecord; j++ {
			batch = append(batch, sig(src, score, at))
		}
		if _, err := w.Record(agent, "", batch...); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTrustGate(t *testing.T) {
	w := testWorkspace(t)
	newbie, flaky, solid, fewBad := testKey(t, 1), testKey(t, 2), testKey(t, 3), testKey(t, 4)
	record(t, w, flaky.ID(), 20, 0.2, t0) // confidence 0.67
	record(t, w, solid.ID(), 20, 0.9, t0) // confidence 0.67
	record(t, w, fewBad.ID(), 3, 0.1, t0) // confidence 0.23
	// A profile with other dimensions only is still unknown in reliability.
	if _, err := w.Record(newbie.ID(), "", Signal{Source: solid.ID(), Dimension: Coordination, Score: 0, Timestamp: t0}); err != nil {
		t.Fatal(err)
	}
	gate := TrustGate{MinReliability: 0.6, MinConfidence: 0.5}
	for _, c := range []struct {
		agent   string
		known   bool
		allowed bool
		reason  string
	}{
		{newbie.ID(), false, true, "unknown, not untrusted"},
		{testKey(t, 5).DID(), false, true, "unknown, not untrusted"},
		{flaky.ID(), true, false, "below the required 0.60"},
		{solid.DID(), true, true, "meets"},
		{fewBad.ID(), true, true, "too little data"},
	} {
		v, err := w.Trust(c.agent, t0)
		if err != nil {
			t.Fatal(err)
		}
		ok, reason := gate.Allow(v)
		if v.Known != c.known || ok != c.allowed || !strings.Contains(reason, c.reason) {
			t.Errorf("%s: %+v → %v %q", c.agent, v, ok, reason)
		}
	}
	// Reliability is read with decay: five years on, 0.2 has risen to the
	// 0.5 baseline, which a gate at 0.45 lets through.
	later := t0.Add(60 * Month)
	v, _ := w.Trust(flaky.ID(), later)
	if v.Reliability != 0.5 {
		t.Fatalf("decayed reliability %v", v.Reliability)
	}
	if ok, _ := (TrustGate{MinReliability: 0.45, MinConfidence: 0.5}).Allow(v); !ok {
		t.Fatal("decayed score refused")
	}
	if v, _ := w.Trust(flaky.ID(), t0); func() bool { ok, _ := (TrustGate{MinReliability: 0.45, MinConfidence: 0.5}).Allow(v); return ok }() {
		t.Fatal("fresh low score allowed")
	}
	// The zero gate allows everyone; a misconfigured one no one.
	if ok, _ := (TrustGate{}).Allow(TrustView{Known: true, Reliability: 0, Confidence: 1}); !ok {
		t.Fatal("zero gate refused")
	}
	for _, g := range []TrustGate{{MinReliability: math.NaN()}, {MinConfidence: 1.5}, {MinReliability: -1}} {
		if ok, reason := g.Allow(TrustView{}); ok || !strings.Contains(reason, "misconfigured") {
			t.Errorf("%+v allowed: %s", g, reason)
		}
	}
}

// A gate at exactly the threshold: confidence equal to MinConfidence
// applies the gate; reliability equal to MinReliability passes.
func TestTrustGateBoundaries(t *testing.T) {
	g := TrustGate{MinReliability: 0.6, MinConfidence: 0.5}
	if ok, _ := g.Allow(TrustView{Known: true, Reliability: 0.59, Confidence: 0.5}); ok {
		t.Fatal("confidence at the threshold did not apply the gate")
	}
	if ok, _ := g.Allow(TrustView{Known: true, Reliability: 0.6, Confidence: 0.9}); !ok {
		t.Fatal("reliability at the threshold refused")
	}
}

// A profile that cannot be read is an error, which a gate turns into a
// denial, never "unknown".
func TestTrustUnreadableProfile(t *testing.T) {
	w := testWorkspace(t)
	k := testKey(t, 1)
	slug, _ := AgentSlug(k.ID())
	writeWS(t, w, "reputation/"+slug+".md", "---\nnot: [valid\n---\n")
	if _, err := w.Trust(k.ID(), t0); err == nil {
		t.Fatal("no error")
	}
	if _, err := w.Trust("../../etc/passwd", t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("hostile agent: %v", err)
	}
}

// Trust caches parsed profiles, but every write, removal or replacement
// of the file is seen by the next call.
func TestTrustSeesEveryWrite(t *testing.T) {
	w := testWorkspace(t)
	a, src := testKey(t, 1), testKey(t, 2)
	for i := 1; i <= 3; i++ {
		if _, err := w.Record(a.ID(), "", sig(src.ID(), 0.5, t0)); err != nil {
			t.Fatal(err)
		}
		v, err := w.Trust(a.ID(), t0)
		if err != nil || v.SampleSize != i {
			t.Fatalf("after %d signals: %+v %v", i, v, err)
		}
	}
	// Another Workspace value (another process) writes.
	other, _ := Open(w.Dir())
	if _, err := other.Record(a.ID(), "", sig(src.ID(), 0.5, t0)); err != nil {
		t.Fatal(err)
	}
	if v, _ := w.Trust(a.ID(), t0); v.SampleSize != 4 {
		t.Fatalf("write by another writer unseen: %+v", v)
	}
	slug, _ := AgentSlug(a.ID())
	path := w.path(ProfilesDir, slug)
	data, _ := os.ReadFile(path)
	// Replaced by a file that no longer parses: an error, not the cache.
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), "rdp: \"1.0\"", "rdp: \"9.9\"", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Trust(a.ID(), t0); err == nil {
		t.Fatal("stale cache used for a changed file")
	}
	os.Remove(path)
	if v, err := w.Trust(a.ID(), t0); err != nil || v.Known {
		t.Fatalf("removed profile: %+v %v", v, err)
	}
}

// A clock behind the last signal reads the reliability undecayed; the
// agent does not become unknown.
func TestTrustClockBehind(t *testing.T) {
	w := testWorkspace(t)
	a := testKey(t, 1)
	record(t, w, a.ID(), 20, 0.1, t0)
	v, err := w.Trust(a.ID(), t0.Add(-time.Hour))
	if err != nil || !v.Known || v.Reliability != 0.1 || v.SampleSize != 20 {
		t.Fatalf("%+v %v", v, err)
	}
	if ok, _ := (TrustGate{MinReliability: 0.5, MinConfidence: 0.5}).Allow(v); ok {
		t.Fatal("allowed")
	}
}
