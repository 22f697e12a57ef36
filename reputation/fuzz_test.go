package reputation

import (
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzParseProfile: parsing never panics, and appending a signal to any
// profile that parses, by copying the list's text or by encoding it in
// full, gives a file that parses to the profile plus the signal, with
// every top-level field kept.
func FuzzParseProfile(f *testing.F) {
	f.Add([]byte(specExampleA1))
	f.Add([]byte(strings.ReplaceAll(foreignProfile, "reputation:scribe", "reputation:research-bot")))
	f.Add([]byte(strings.Replace(specExampleA1, "signals:\n", "signals:\n# note\n- {source: \"did:a:b\", dimension: x, score: 1, timestamp: \"2026-01-01T00:00:00Z\"}\n", 1)))
	f.Add([]byte(strings.Replace(specExampleA1, "signals:", "x: |\n  signals: []\nsignals:", 1)))
	f.Add([]byte(strings.Replace(specExampleA1, "signals:", "signals: # log", 1) + "\n"))
	f.Add([]byte("---\na: &x 1\nb: *x\n---\n"))
	f.Add([]byte(strings.Replace(specExampleA1, "    message: \"Completed first task successfully\"", "    message: |\n      two\n\n      paragraphs\n    note: >-\n      folded\n      text\n# between\n- source: did:x:y\n  dimension: tone\n  score: 1\n  timestamp: 2026-01-01T00:00:00Z\n", 1)))
	f.Add([]byte(strings.Replace(specExampleA1, "domainCompetence: {}", "domainCompetence:\n  \"law\": {score: 0.5, sampleSize: 0}\nx-notes: |\n  free\n  text", 1)))
	// A lone CR (and NEL, LS, PS) is a line break to the YAML parser but
	// not to a reader counting "\n": found by the fuzzer in CI.
	f.Add([]byte(strings.Replace(strings.ReplaceAll(foreignProfile, "reputation:scribe", "reputation:research-bot"), "dimension: tone\n", "dimension: tone\r", 1)))
	f.Add([]byte(strings.Replace(specExampleA1, "\n    score:", "\u2028    score:", 1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		lp, _, err := parseProfileFile(data, "research-bot")
		if err != nil {
			return
		}
		keys := topKeys(t, lp.doc.root)
		s := Signal{Source: "did:key:zFuzz", Dimension: Reliability, Score: 0.25, Timestamp: t0, Evidence: "contract:fuzz", Message: "fuzz\nline"}
		want := *lp.p
		want.Signals = append(append([]Signal(nil), want.Signals...), s)
		want.Dimensions = copyDims(want.Dimensions)
		want.DomainCompetence = copyDims(want.DomainCompetence)
		want.apply(s)
		want.Signals = want.Signals[:len(want.Signals)-1]
		p := lp.p
		p.apply(s)
		setState(lp.doc, p, []Signal{s})

		var outputs [][]byte
		if out, ok := lp.doc.splice([]*yaml.Node{s.node()}); ok {
			outputs = append(outputs, out)
		}
		full, err := lp.doc.encodeAppending([]*yaml.Node{s.node()})
		if err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, full)
		for i, out := range outputs {
			back, _, err := parseProfileFile(out, "research-bot")
			if err != nil {
				t.Fatalf("output %d does not parse: %v\n%s", i, err, out)
			}
			if !reflect.DeepEqual(back.p, &want) {
				t.Fatalf("output %d reads back as\n%+v\nwant\n%+v\n%s", i, back.p, &want, out)
			}
			for k := range keys {
				if lookup(back.doc.root, k) == nil {
					t.Fatalf("output %d lost field %q", i, k)
				}
			}
		}
	})
}

func topKeys(t *testing.T, root *yaml.Node) map[string]bool {
	keys := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		keys[root.Content[i].Value] = true
	}
	return keys
}

func copyDims(m map[string]Dimension) map[string]Dimension {
	if m == nil {
		return nil
	}
	out := make(map[string]Dimension, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// FuzzParseContract: parsing never panics, and a contract that parses
// survives a lifecycle step and a rewrite with everything else equal.
func FuzzParseContract(f *testing.F) {
	f.Add([]byte(strings.ReplaceAll(foreignContract, "draft-coverage-report", "fz")))
	f.Add([]byte(strings.NewReplacer("draft-coverage-report", "fz", "status: completed", "status: draft").Replace(foreignContract)))
	f.Add([]byte("---\nawp: \"0.3.0\"\nrdp: \"1.0\"\ntype: delegation-contract\nid: contract:fz\nstatus: active\ndelegator: did:a:b\ndelegate: did:a:c\ndelegateSlug: c\ncreated: 2026-01-01T00:00:00Z\ntask: {description: x}\nevaluation: {criteria: {a: 1}, result: null}\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lc, _, err := parseContractFile(data, "fz")
		if err != nil {
			return
		}
		c := lc.c
		to, ok := next[c.Status]
		if !ok {
			return
		}
		want := *c
		want.Status = to
		if to == Evaluated {
			want.Result = map[string]float64{}
			for name := range c.Criteria {
				want.Result[name] = 1
			}
		}
		*c = want
		setStatus(lc.doc, c)
		out, err := lc.doc.encode()
		if err != nil {
			t.Fatal(err)
		}
		back, _, err := parseContractFile(out, "fz")
		if err != nil {
			t.Fatalf("rewritten contract does not parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back.c, &want) {
			t.Fatalf("read back\n%+v\nwant\n%+v", back.c, &want)
		}
	})
}

// FuzzNames: every name this package derives from untrusted text is a
// safe file name.
func FuzzNames(f *testing.F) {
	for _, s := range []string{"", "../../etc/passwd", "del_0123456789ab", "did:key:z6Mkon3Necd6NkkyfoGoHxid2znGc59LU3K7mubaRcFbLfLX", "AI Research", "research-bot", "..", "/", "did:web:a%2F..", "\x00", "Ünï"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if out := Slugify(s); out != "" && (!ValidSlug(out) || len(out) > MaxNameLen) {
			t.Fatalf("Slugify(%q) = %q", s, out)
		}
		if out, err := LinkSlug(s); err == nil && !ValidSlug(out) {
			t.Fatalf("LinkSlug(%q) = %q", s, out)
		}
		if out, err := AgentSlug(s); err == nil && !ValidSlug(out) {
			t.Fatalf("AgentSlug(%q) = %q", s, out)
		}
		if ValidDID(s) && (strings.ContainsAny(s, "/\\ \x00") || !strings.HasPrefix(s, "did:")) {
			t.Fatalf("ValidDID(%q)", s)
		}
		if ref, err := parseAgent(s); err == nil && ref.slug != "" && !ValidSlug(ref.slug) {
			t.Fatalf("parseAgent(%q) slug %q", s, ref.slug)
		}
		if ValidSlug(s) && strings.ContainsAny(s, "./\\") {
			t.Fatalf("ValidSlug(%q)", s)
		}
	})
}
