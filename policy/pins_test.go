package policy

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcpdef"
)

func testPins(t testing.TB) *Pins {
	t.Helper()
	var defs []*mcpdef.Definition
	for _, e := range []struct {
		k   mcpdef.Kind
		raw string
	}{
		{mcpdef.Tool, `{"name":"read_file","description":"Read a file.","inputSchema":{"type":"object"}}`},
		{mcpdef.Tool, `{"name":"write_file","description":"Write <a> & b.","inputSchema":{"type":"object"}}`},
		{mcpdef.Prompt, `{"name":"summarize","arguments":[{"name":"path"}]}`},
		{mcpdef.ResourceTemplate, `{"uriTemplate":"doc:///{+path}","name":"document"}`},
	} {
		d, err := mcpdef.Read(e.k, []byte(e.raw))
		if err != nil {
			t.Fatal(err)
		}
		defs = append(defs, d)
	}
	p, err := NewPins(defs)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func testLock(t testing.TB) string {
	t.Helper()
	b, err := testPins(t).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPinsRoundTrip(t *testing.T) {
	lock := testLock(t)
	p, err := ParsePins([]byte(lock))
	if err != nil {
		t.Fatalf("%v\n%s", err, lock)
	}
	want := testPins(t)
	for _, k := range mcpdef.Kinds {
		if p.Count(k) != want.Count(k) {
			t.Errorf("%s: %d pins, want %d", k, p.Count(k), want.Count(k))
		}
		for name, w := range want.Entries[k] {
			got := p.Lookup(k, name)
			if got == nil || got.SHA256 != w.SHA256 || !bytes.Equal(got.Definition, w.Definition) || got.Line == 0 {
				t.Errorf("%s %s: %+v, want %+v", k, name, got, w)
			}
		}
	}
	again, err := p.Marshal()
	if err != nil || string(again) != lock {
		t.Errorf("written again:\n%s\nfirst:\n%s", again, lock)
	}
	if !strings.Contains(lock, `"Write <a> & b."`) {
		t.Errorf("the lock escapes what JSON need not:\n%s", lock)
	}
	// The line of an entry is where it starts.
	if l := p.Lookup(mcpdef.Tool, "write_file").Line; !strings.Contains(strings.Split(lock, "\n")[l-1], "{") {
		t.Errorf("write_file's line %d: %q", l, strings.Split(lock, "\n")[l-1])
	}
	// A lock may hold digests alone.
	d := p.Lookup(mcpdef.Tool, "read_file")
	bare := `{"version":1,"tools":[{"name":"read_file","sha256":"` + d.SHA256 + `"}],"prompts":[],"resource_templates":[]}`
	if p, err := ParsePins([]byte(bare)); err != nil || p.Lookup(mcpdef.Tool, "read_file").Definition != nil {
		t.Errorf("a digest-only lock: %v", err)
	}
}

// A malformed lock file is refused with the entry (or line) and the fix.
func TestParsePinsErrors(t *testing.T) {
	lock := testLock(t)
	p := testPins(t)
	readSum := p.Lookup(mcpdef.Tool, "read_file").SHA256
	writeSum := p.Lookup(mcpdef.Tool, "write_file").SHA256
	for _, c := range []struct {
		name, lock string
		key, want  string
	}{
		{"truncated", lock[:len(lock)/2], "", "truncated"},
		{"cut after a value", lock[:strings.Index(lock, `"prompts"`)], "", "truncated"},
		{"empty", "", "", "empty"},
		{"not an object", `[]`, "", "a lock file is a JSON object"},
		{"trailing", lock + "{}", "", "more follows"},
		{"duplicate names", `{"version":1,"tools":[{"name":"read_file","sha256":"` + readSum + `"},` + "\n" + `{"name":"read_file","sha256":"` + writeSum + `"}],"prompts":[],"resource_templates":[]}`,
			"tools[1]", `"read_file" is pinned twice (first as tools[0])`},
		{"short digest", strings.Replace(lock, readSum, readSum[:63], 1), "tools[0].sha256", "64 lower-case hex digits"},
		{"long digest", strings.Replace(lock, readSum, readSum+"0", 1), "tools[0].sha256", "65 characters"},
		{"upper-case digest", strings.Replace(lock, readSum, strings.ToUpper(readSum), 1), "tools[0].sha256", "lower-case hex"},
		{"digest of another definition", strings.Replace(lock, readSum, writeSum, 1), "tools[0].sha256", "not the digest of the entry's definition"},
		{"edited definition", strings.Replace(lock, `"Read a file."`, `"Read a file, then mail it."`, 1), "tools[0].sha256", "changed by hand"},
		{"definition of another name", strings.Replace(lock, `"name": "read_file"`+",\n      \"sha256\"", `"name": "read_it"`+",\n      \"sha256\"", 1), "tools[0].definition", `defines the tool "read_file", but the entry is named "read_it"`},
		{"unknown member", strings.Replace(lock, `"name": "summarize",`, `"name": "summarize", "approved_by": "me",`, 1), "prompts[0]", `unknown member "approved_by"`},
		{"re-cased member", strings.Replace(lock, `"name": "summarize",`, `"Name": "summarize",`, 1), "prompts[0]", `unknown member "Name"`},
		{"unknown key", strings.Replace(lock, `"version": 1`, `"version": 1, "resources": []`, 1), "resources", "unknown key"},
		{"missing section", strings.Replace(lock, `"version": 1`, `"version": 1, "x": 0`, 1)[:0] + `{"version":1,"tools":[],"prompts":[]}`, "resource_templates", "missing"},
		{"missing version", `{"tools":[],"prompts":[],"resource_templates":[]}`, "version", "missing"},
		{"other version", strings.Replace(lock, `"version": 1`, `"version": 2`, 1), "version", "reads version 1"},
		{"key twice", strings.Replace(lock, `"version": 1`, `"version": 1, "version": 1`, 1), "version", "given twice"},
		{"section not a list", `{"version":1,"tools":{},"prompts":[],"resource_templates":[]}`, "tools", "must be a list"},
		{"empty name", `{"version":1,"tools":[{"name":"","sha256":"` + readSum + `"}],"prompts":[],"resource_templates":[]}`, "tools[0].name", "non-empty"},
		{"invalid UTF-8", strings.Replace(lock, "Read a file.", "Read a \xff file.", 1), "", "UTF-8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePins([]byte(c.lock))
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("ParsePins = %v, want Errors", err)
			}
			e := errs[0]
			if e.Key != c.key || !strings.Contains(e.Msg, c.want) || e.Line == 0 && c.key != "version" && c.key != "resource_templates" {
				t.Errorf("first problem %q (key %q, line %d), want key %q and %q", e.Error(), e.Key, e.Line, c.key, c.want)
			}
			if c.want != "UTF-8" && !strings.Contains(e.Msg, "delegateos pin") && !strings.Contains(e.Msg, "unknown") {
				t.Errorf("%q does not say how to fix it", e.Msg)
			}
		})
	}
}

func TestLoadPins(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tools.lock")
	if _, err := LoadPins(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing lock: %v", err)
	}
	lock := testLock(t)
	if err := os.WriteFile(path, []byte(lock[:len(lock)-20]), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadPins(path)
	var errs Errors
	if !errors.As(err, &errs) || errs[0].File != path || !strings.HasPrefix(err.Error(), path+":") {
		t.Errorf("a truncated lock: %v", err)
	}
	if err := os.WriteFile(path, []byte(lock), 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err := LoadPins(path); err != nil || p.Path != path || p.Count(mcpdef.Tool) != 2 {
		t.Errorf("LoadPins = %+v, %v", p, err)
	}
}

// tool_pins names the lock relative to the policy; policy check warns of
// a missing one and refuses a malformed one.
func TestToolPinsInPolicy(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte("roots: []\nallow_unauthenticated: true\ntool_pins: tools.lock\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, ws, err := Lint(pol)
	if err != nil || p.ToolPins != filepath.Join(dir, "tools.lock") {
		t.Fatalf("Lint = %+v, %v", p, err)
	}
	if len(ws) != 1 || ws[0].Key != "tool_pins" || ws[0].Line != 3 || !strings.Contains(ws[0].Msg, "refuses to start") || !strings.Contains(ws[0].Msg, "delegateos pin --policy") {
		t.Errorf("warnings %v", ws)
	}
	lock := strings.Replace(testLock(t), `"Read a file."`, `"Read a file, then mail it."`, 1)
	if err := os.WriteFile(filepath.Join(dir, "tools.lock"), []byte(lock), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = Lint(pol)
	var errs Errors
	if !errors.As(err, &errs) || errs[0].File != filepath.Join(dir, "tools.lock") || errs[0].Key != "tools[0].sha256" {
		t.Errorf("a malformed lock: %v", err)
	}
}

func TestNewPinsRefusesTwoDefinitionsOfOneName(t *testing.T) {
	a, _ := mcpdef.Read(mcpdef.Tool, []byte(`{"name":"t","description":"a"}`))
	b, _ := mcpdef.Read(mcpdef.Tool, []byte(`{"name":"t","description":"b"}`))
	if _, err := NewPins([]*mcpdef.Definition{a, b}); err == nil || !strings.Contains(err.Error(), `lists the tool "t" twice`) {
		t.Errorf("NewPins = %v", err)
	}
	if p, err := NewPins([]*mcpdef.Definition{a, a}); err != nil || p.Count(mcpdef.Tool) != 1 {
		t.Errorf("the same definition twice: %v", err)
	}
}

// Any bytes either parse into pins that are written and read back as
// themselves, or are refused with Errors.
func FuzzParsePins(f *testing.F) {
	f.Add([]byte(testLock(f)))
	f.Add([]byte(`{"version":1,"tools":[],"prompts":[],"resource_templates":[]}`))
	f.Add([]byte(`{"version":1,"tools":[{"name":"a","sha256":"00"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePins(data)
		if err != nil {
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("ParsePins error %v is not Errors", err)
			}
			return
		}
		out, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		q, err := ParsePins(out)
		if err != nil {
			t.Fatalf("written pins do not parse: %v\n%s", err, out)
		}
		for _, k := range mcpdef.Kinds {
			if q.Count(k) != p.Count(k) {
				t.Fatalf("%s: %d pins, then %d", k, p.Count(k), q.Count(k))
			}
			for n, pin := range p.Entries[k] {
				if g := q.Lookup(k, n); g == nil || g.SHA256 != pin.SHA256 || !bytes.Equal(g.Definition, pin.Definition) {
					t.Fatalf("%s %q changed when written", k, n)
				}
			}
		}
	})
}
