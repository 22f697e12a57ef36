package mcpdef

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const readFile = `{"name":"read_file","description":"Read a file.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}},"annotations":{"readOnlyHint":true}}`

func TestReadKeepsOnlyTheDefinition(t *testing.T) {
	d, err := Read(Tool, []byte(readFile))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"annotations":{"readOnlyHint":true},"description":"Read a file.","inputSchema":{"properties":{"path":{"type":"string"}},"type":"object"},"name":"read_file"}`
	if string(d.Canonical) != want || d.Name != "read_file" || d.Kind != Tool {
		t.Fatalf("Read = %+v\n%s", d, d.Canonical)
	}
	// The same definition written another way, with members a pin does
	// not cover and null for absent fields, is the same definition.
	same := `{ "_meta": {"x": 1}, "icons": [], "annotations": {"readOnlyHint": true}, "title": null, "outputSchema": null,
		"inputSchema": {"properties": {"path": {"type": "string"}}, "type": "object"},
		"description": "Read a file.", "name": "read_\u0066ile", "execution": {"taskSupport": "optional"} }`
	d2, err := Read(Tool, []byte(same))
	if err != nil {
		t.Fatal(err)
	}
	if d2.Digest() != d.Digest() {
		t.Errorf("the same definition has two digests:\n%s\n%s", d.Canonical, d2.Canonical)
	}
	if len(d.Digest()) != DigestLen {
		t.Errorf("digest %q", d.Digest())
	}
	// Each field a pin covers changes the digest.
	for _, changed := range []string{
		strings.Replace(readFile, `"Read a file."`, `"Read a file. Then mail it."`, 1),
		strings.Replace(readFile, `"readOnlyHint":true`, `"readOnlyHint":false`, 1),
		strings.Replace(readFile, `"type":"string"`, `"type":"number"`, 1),
		strings.Replace(readFile, `{"name"`, `{"title":"Read","name"`, 1),
		strings.Replace(readFile, `{"name"`, `{"outputSchema":{"type":"object"},"name"`, 1),
	} {
		c, err := Read(Tool, []byte(changed))
		if err != nil {
			t.Fatal(err)
		}
		if c.Digest() == d.Digest() {
			t.Errorf("%s has the original's digest", changed)
		}
		if fields := ChangedFields(Tool, d.Canonical, c.Canonical); fields == "" {
			t.Errorf("%s: no field changed", changed)
		}
	}
}

func TestReadKinds(t *testing.T) {
	p, err := Read(Prompt, []byte(`{"name":"summarize","description":"Summarize","arguments":[{"name":"path","required":true}],"_meta":{}}`))
	if err != nil || string(p.Canonical) != `{"arguments":[{"name":"path","required":true}],"description":"Summarize","name":"summarize"}` {
		t.Errorf("prompt: %v %s", err, p.Canonical)
	}
	rt, err := Read(ResourceTemplate, []byte(`{"uriTemplate":"doc:///{+path}","name":"document","mimeType":"text/plain"}`))
	if err != nil || rt.Name != "doc:///{+path}" || string(rt.Canonical) != `{"mimeType":"text/plain","name":"document","uriTemplate":"doc:///{+path}"}` {
		t.Errorf("template: %v %+v", err, rt)
	}
	if k, ok := KindOfList("resources/templates/list"); !ok || k != ResourceTemplate {
		t.Errorf("KindOfList: %v %v", k, ok)
	}
	if _, ok := KindOfList("resources/list"); ok {
		t.Error("resources/list is not pinned")
	}
}

// An entry that a client could read otherwise than the hash does is
// refused.
func TestReadRefuses(t *testing.T) {
	for _, bad := range []string{
		`{"name":"a","description":"ok","Description":"evil"}`,
		`{"name":"a","DESCRIPTION":"evil"}`,
		`{"name":"a","description":"ok","description":"evil"}`,
		`{"name":"a","inputSchema":{"type":"object","type":"string"}}`,
		`{"name":"a","description":"\ud800"}`,
		"{\"name\":\"a\",\"description\":\"\xff\"}",
		`{"name":""}`,
		`{"name":7}`,
		`{"description":"no name"}`,
		`["name","a"]`,
		`null`,
		`{"name":"a"} {}`,
		`{"name":"a","inputSchema":{"maximum":1e400}}`,
	} {
		if d, err := Read(Tool, []byte(bad)); err == nil || !errors.Is(err, ErrNotDefinition) {
			t.Errorf("Read(%s) = %+v, %v; want an error", bad, d, err)
		}
	}
}

func TestDiff(t *testing.T) {
	old := []byte(`{"description":"a","inputSchema":{"type":"object"},"name":"t"}`)
	cur := []byte(`{"annotations":{"readOnlyHint":true},"description":"b","inputSchema":{"type":"object"},"name":"t"}`)
	got := Diff(Tool, old, cur)
	if len(got) != 2 || got[0].Field != "description" || string(got[0].Old) != `"a"` || string(got[0].New) != `"b"` ||
		got[1].Field != "annotations" || got[1].Old != nil || string(got[1].New) != `{"readOnlyHint":true}` {
		b, _ := json.Marshal(got)
		t.Errorf("Diff = %s", b)
	}
	if len(Diff(Tool, old, old)) != 0 {
		t.Error("a definition differs from itself")
	}
	if all := Diff(Prompt, nil, []byte(`{"description":"x","name":"p"}`)); len(all) != 2 {
		t.Errorf("Diff from nothing = %v", all)
	}
}

// Reading is a function of the definition alone: a definition read again
// from its canonical form is itself.
func FuzzRead(f *testing.F) {
	f.Add(0, []byte(readFile))
	f.Add(1, []byte(`{"name":"p","arguments":[{"name":"x"}]}`))
	f.Add(2, []byte(`{"uriTemplate":"a{b}","description":"\u2028"}`))
	f.Add(0, []byte(`{"name":"a","Description":"x"}`))
	f.Fuzz(func(t *testing.T, kind int, entry []byte) {
		k := Kinds[uint(kind)%uint(NumKinds)]
		d, err := Read(k, entry)
		if err != nil {
			return
		}
		again, err := Read(k, d.Canonical)
		if err != nil {
			t.Fatalf("the canonical form %s cannot be read: %v", d.Canonical, err)
		}
		if string(again.Canonical) != string(d.Canonical) || again.Name != d.Name {
			t.Fatalf("read again: %s, first %s", again.Canonical, d.Canonical)
		}
		if len(Diff(k, d.Canonical, again.Canonical)) != 0 {
			t.Fatalf("a definition differs from itself: %s", d.Canonical)
		}
	})
}
