package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
)

func FuzzParse(f *testing.F) {
	f.Add([]byte(mapPolicy))
	f.Add([]byte("roots:\n  - " + rootID + "\ndefault_cost: 5\nlog: {level: warn, file: x}\nmax_frame_bytes: 2048\n"))
	f.Add([]byte("tools:\n  - {match: \"{a,b}*[!c]\", namespace: n, action: a, resource: {arg: /a~1b/0, prefix: p}}\n"))
	f.Add([]byte("tools:\n  - &r {match: t, namespace: n, action: a}\n  - *r\n"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("tools: [{match: '\\\\', namespace: n, action: a}]"))
	f.Add([]byte(resourcePolicy))
	f.Add([]byte("resources: [{match: \"a://[!/]{x,*}\", namespace: n, action: a, max_cost: 3}]\nprompts: [{match: \"p?\", namespace: m, action: g, resource: r}]\n"))
	f.Add([]byte(ratePolicy))
	f.Add([]byte("rate: \"1/1.5h\"\ntools: [{match: t, namespace: n, action: a, rate: 3/1d}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data, "/d")
		if err != nil {
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 || len(errs) > maxProblems {
				t.Fatalf("error %T %v is not 1..%d Errors", err, err, maxProblems)
			}
			for _, e := range errs {
				if e.Line < 0 || e.Msg == "" {
					t.Fatalf("problem without a line or message: %+v", e)
				}
			}
			return
		}
		// Every rate that parses is one the gate can enforce, and reads
		// back from its String.
		rates := []Rate{p.Rate}
		for _, rules := range [][]Rule{p.Tools, p.Resources, p.Prompts} {
			for _, r := range rules {
				rates = append(rates, r.Rate)
			}
		}
		for _, r := range rates {
			if back, err := ParseRate(r.String()); !r.IsZero() && (err != nil || back != r || r.N < 1 || r.N > MaxRateCalls || r.Per < MinRatePer || r.Per > MaxRatePer) {
				t.Fatalf("rate %+v parsed; written %q it reads back as %+v, %v", r, r.String(), back, err)
			}
		}
		// Whatever parses maps every tool without panicking, and decides
		// by a rule that matches it.
		for _, tool := range []string{"read_file", "a", "t", string(data[:min(len(data), 20)])} {
			c, err := p.Map(tool, json.RawMessage(`{"path": "/x", "a/b": ["y"]}`))
			if err != nil && !errors.Is(err, ErrUnmappable) {
				t.Fatalf("Map error %v does not wrap ErrUnmappable", err)
			}
			if c.Rule >= 0 && !p.Tools[c.Rule].matches(tool) {
				t.Fatalf("rule %d does not match %q", c.Rule, tool)
			}
			p.Visible(tool, nil)
		}
		// CheckOffered agrees with Map: a tool is unmatched exactly when
		// no rule decides for it, and each warning names a rule.
		offered := []string{"read_file", "a", "t", string(data[:min(len(data), 20)])}
		ws, unmatched := p.CheckOffered(Offered{Tools: offered})
		un := map[string]bool{}
		for _, u := range unmatched {
			un[u.Name] = true
		}
		for _, tool := range offered {
			if c, _ := p.Map(tool, nil); (c.Rule < 0) != un[tool] {
				t.Fatalf("tool %q: Map's rule %d, unmatched %v", tool, c.Rule, un[tool])
			}
		}
		if len(ws) > len(p.Tools) {
			t.Fatalf("%d warnings for %d rules", len(ws), len(p.Tools))
		}
		all := []dct.Capability{{Namespace: "*", Action: "*", Resource: "*"}}
		for _, name := range []string{"demo://resource/static/document/a.md", "a://x", "p1", "simple-prompt", string(data[:min(len(data), 30)])} {
			c, err := p.MapResource(name)
			if err != nil && !errors.Is(err, ErrUnmappable) || err == nil && (c.Resource != name || c.MaxCost < c.Cost) {
				t.Fatalf("MapResource(%q) = %+v, %v", name, c, err)
			}
			if c.Rule >= 0 && !p.Resources[c.Rule].matches(name) {
				t.Fatalf("resource rule %d does not match %q", c.Rule, name)
			}
			if p.ResourceVisible(name, all) != (err == nil) {
				t.Fatalf("ResourceVisible(%q) disagrees with MapResource: %v", name, err)
			}
			p.ResourceTemplateVisible(name+"{x}", all)
			c, err = p.MapPrompt(name, nil)
			if err != nil && !errors.Is(err, ErrUnmappable) || err == nil && c.MaxCost < c.Cost {
				t.Fatalf("MapPrompt(%q) = %+v, %v", name, c, err)
			}
			if c.Rule >= 0 && !p.Prompts[c.Rule].matches(name) {
				t.Fatalf("prompt rule %d does not match %q", c.Rule, name)
			}
		}
	})
}

func FuzzStarter(f *testing.F) {
	f.Add("read_file", "Read a file.", `{"type":"object","properties":{"path":{"type":"string"}}}`, "mcp")
	f.Add("a:b*c{d}", "line one\nline two\x00", `{"properties":{"url":{"type":["null","string"]}}}`, "docs")
	f.Add("true", "\u2028", `[]`, "")
	f.Add("\u0085x\\\"", "", `{"properties":{"file":{"type":"number"}}}`, "n")
	f.Add("t", "", `{}`, "mcp-resource")
	f.Fuzz(func(t *testing.T, name, desc, schema, ns string) {
		var b strings.Builder
		err := WriteStarter(&b, Starter{Command: []string{"up", name}, Namespace: ns,
			Tools: []StarterTool{{Name: name, Description: desc, InputSchema: json.RawMessage(schema)}, {Name: "other"}}})
		if err != nil {
			if checkName(ns) == nil && ns != "" && ns != ResourceNamespace && ns != PromptNamespace {
				t.Fatalf("WriteStarter refused namespace %q: %v", ns, err)
			}
			return
		}
		p, err := Parse([]byte(b.String()), "")
		if err != nil {
			t.Fatalf("the starter policy does not parse: %v\n%s", err, b.String())
		}
		if name == "other" || len(p.Tools) < 2 {
			return // the tool was left out, with a comment
		}
		c, err := p.Map(name, json.RawMessage(`{"path": "/p", "file": "/f", "filename": "/fn", "uri": "u", "url": "/url"}`))
		if c.Rule != 0 || err != nil && c.Namespace == "" {
			t.Fatalf("Map(%q) on the starter = %+v, %v\n%s", name, c, err, b.String())
		}
	})
}
