package reputation

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/delegateos/delegateos/internal/timestamp"
)

// fastTime reads what timestamp.Parse reads, for the text it accepts.
func TestFastTime(t *testing.T) {
	for _, s := range []string{
		"2026-02-15T10:30:00.000Z", "2024-02-29T23:59:59.999Z", "2025-02-29T00:00:00.000Z",
		"2026-04-31T00:00:00.000Z", "2026-13-01T00:00:00.000Z", "2026-00-01T00:00:00.000Z",
		"2026-01-00T00:00:00.000Z", "2026-01-01T24:00:00.000Z", "2026-01-01T00:60:00.000Z",
		"2026-01-01T00:00:60.000Z", "0000-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000z",
		"2026-01-01T00:00:00.00Z", "2026-01-01 00:00:00.000Z", "2026-01-01T00:00:00.000+00:00",
	} {
		want, err := timestamp.Parse(s)
		got, ok := fastTime([]byte(s))
		if ok && (err != nil || !got.Equal(truncate(want))) {
			t.Errorf("%s: fast %v, timestamp.Parse %v %v", s, got, want, err)
		}
		if !ok && err == nil && len(s) == 24 && s[23] == 'Z' {
			t.Errorf("%s: fast path refused a timestamp in its own form", s)
		}
	}
	// The day cache reads what fastTime reads, the same day or not.
	var c dayCache
	for _, s := range []string{
		"2026-02-15T10:30:00.000Z", "2026-02-15T23:59:59.999Z", "2026-02-15T24:00:00.000Z", "2026-02-15T1x:00:00.000Z",
		"2026-02-15T00:00:00.000+", "2026-02-16T00:00:00.001Z", "2026-02-16T00:00:00.001", "2026-02-30T00:00:00.000Z",
		"2026-02-16T07:08:09.010Z",
	} {
		want, wok := fastTime([]byte(s))
		got, ok := c.fastTime([]byte(s))
		if ok != wok || !got.Equal(want) || got != want {
			t.Errorf("%s: cached %v %v, fastTime %v %v", s, got, ok, want, wok)
		}
	}
}

// fastLayout is a profile in the layout this package writes.
func fastLayout(tb testing.TB) []byte {
	tb.Helper()
	w := testWorkspace(tb)
	agent, src := testKey(tb, 1), testKey(tb, 2)
	slug := bigProfile(tb, w, agent.DID(), src.DID(), 3)
	data, err := os.ReadFile(w.path(ProfilesDir, slug))
	if err != nil {
		tb.Fatal(err)
	}
	return bytes.Replace(data, []byte(slug), []byte("research-bot"), -1)
}

// FuzzProfileFastPath: whenever the line scanner takes a profile, the
// YAML parser reads the same profile from it, and appending a signal
// writes the same bytes by either path.
func FuzzProfileFastPath(f *testing.F) {
	base := fastLayout(f)
	f.Add(base)
	f.Add(bytes.Replace(base, []byte("    evidence:"), []byte("    domain: \"law\"\n    evidence:"), 1))
	f.Add(bytes.Replace(base, []byte("signals:\n"), []byte("x-note: |\n  signals:\n  - a\nsignals:\n"), 1))
	f.Add(bytes.Replace(base, []byte("dimensions:"), []byte("agentName2: \"a\n  b\"\ndimensions:"), 1))
	f.Add(append(bytes.Replace(base, []byte("\n---\n"), []byte("\nx-after: 1\n---\n"), 1), "tail\n"...))
	f.Add(bytes.Replace(base, []byte("score: 0.1"), []byte("score: 1"), 1))
	f.Add(bytes.Replace(base, []byte("\"reliability\""), []byte("\"domain-competence\""), 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		const slug = "research-bot"
		fast, ok := parseProfileFast(data, slug)
		if !ok {
			return
		}
		slow, problems, err := parseProfileSlow(data, slug)
		if err != nil || len(problems) != 0 {
			t.Fatalf("the scanner took a file the YAML parser refuses: %v %v", err, problems)
		}
		if !sameProfile(fast.p, slow.p) {
			t.Fatalf("scanner\n%+v\nYAML\n%+v", fast.p, slow.p)
		}
		s := Signal{Source: "did:key:zFuzz", Dimension: Reliability, Score: 0.25, Timestamp: t0, Evidence: "contract:fuzz", Message: "fuzz"}
		var outs [2][]byte
		for i, lp := range []*loadedProfile{fast, slow} {
			lp.p.apply(s)
			setState(lp.doc, lp.p, []Signal{s})
			outs[i], err = lp.doc.encodeAppending([]*yaml.Node{s.node()})
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(outs[0], outs[1]) {
			t.Fatalf("appending by the scanner's path wrote\n%s\nand by the YAML path\n%s", outs[0], outs[1])
		}
	})
}

func sameProfile(a, b *Profile) bool {
	if a.Slug != b.Slug || a.AgentDID != b.AgentDID || a.AgentName != b.AgentName || !a.LastUpdated.Equal(b.LastUpdated) ||
		!reflect.DeepEqual(a.Dimensions, b.Dimensions) || !reflect.DeepEqual(a.DomainCompetence, b.DomainCompetence) ||
		len(a.Signals) != len(b.Signals) {
		return false
	}
	for i := range a.Signals {
		if !sameSignal(a.Signals[i], b.Signals[i]) {
			return false
		}
	}
	return true
}

// The scanner takes the layout this package writes and leaves anything
// else to the YAML parser, which reads it the same way or names the
// problem.
func TestFastPathTaken(t *testing.T) {
	base := fastLayout(t)
	if _, ok := parseProfileFast(base, "research-bot"); !ok {
		t.Fatal("the scanner refused the package's own layout")
	}
	for name, data := range map[string][]byte{
		"escape":        bytes.Replace(base, []byte(`"Contract evaluation`), []byte(`"Contract\tevaluation`), 1),
		"non-ASCII":     bytes.Replace(base, []byte(`"Contract evaluation`), []byte(`"Contrat é`), 1),
		"comment":       bytes.Replace(base, []byte("    evidence:"), []byte("    # note\n    evidence:"), 1),
		"unknown field": bytes.Replace(base, []byte("    evidence:"), []byte("    note: \"x\"\n    evidence:"), 1),
		"plain string":  bytes.Replace(base, []byte(`dimension: "reliability"`), []byte(`dimension: reliability`), 1),
		"CRLF":          bytes.ReplaceAll(base, []byte("\n"), []byte("\r\n")),
	} {
		if _, ok := parseProfileFast(data, "research-bot"); ok {
			t.Errorf("%s: the scanner took it", name)
		}
		if _, err := ParseProfile(data, "research-bot"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := bytes.Replace(base, []byte("score: 0.1"), []byte("score: 1.5"), 1)
	if _, ok := parseProfileFast(bad, "research-bot"); ok {
		t.Fatal("the scanner took a score above 1")
	}
	if _, err := ParseProfile(bad, "research-bot"); err == nil || !strings.Contains(err.Error(), "signals[1].score") {
		t.Fatalf("a score above 1: %v", err)
	}
}
