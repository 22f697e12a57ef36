package policy

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func warningLines(ws []*Warning) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.String()
	}
	return out
}

func TestLint(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("revs.json", "[]\n")
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"clean", "roots: [" + rootID + "]\nrevocation_list: revs.json\nupstream_user: nobody\n", []string{}},
		{"no roots key", "default_cost: 1\n", []string{}},
		{"empty roots", "default_cost: 1\nroots: []\n",
			[]string{"P:2: warning: roots: the list is empty, so no token can be verified and every call is denied;"}},
		{"empty roots, tokens not needed", "roots: []\nallow_unauthenticated: true\n", []string{}},
		{"missing revocation list", "roots: [" + rootID + "]\n\nrevocation_list: conf/nope.json\n",
			[]string{"P:3: warning: revocation_list: " + filepath.Join(dir, "conf", "nope.json") + " does not exist, and the proxy refuses to start without it; create it (an empty list is []), or fix the path"}},
		{"unknown upstream user", "upstream_user: no-such-user-here\n",
			[]string{`P:1: warning: upstream_user: there is no user "no-such-user-here" on this machine`}},
		{"unknown upstream group", "upstream_user: nobody:no-such-group-here\n",
			[]string{`P:1: warning: upstream_user: there is no group "no-such-group-here" on this machine`}},
		{"uid without entry", "upstream_user: \"4000000000\"\n",
			[]string{`P:1: warning: upstream_user: uid 4000000000 has no entry in this machine's user database`}},
		{"uid without entry, with gid", "upstream_user: \"4000000000:4000000000\"\n", []string{}},
		{"rate without a spend store", "roots: [" + rootID + "]\nrate: 30/1m\n",
			[]string{"P:2: warning: rate: rate limits without a spend_store are kept in memory only"}},
		{"rule rate without a spend store", "prompts:\n  - {match: p, namespace: n, action: a}\nresources:\n  - {match: r, namespace: n, action: a, rate: 3/1s}\n",
			[]string{"P:4: warning: resources: rate limits without a spend_store are kept in memory only"}},
		{"rate with a spend store", "rate: 30/1m\nspend_store: spend.log\n", []string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := write("policy.yaml", c.src)
			p, ws, err := Lint(path)
			if err != nil || p == nil {
				t.Fatalf("Lint: %v", err)
			}
			got := warningLines(ws)
			if len(got) != len(c.want) {
				t.Fatalf("warnings:\n%s\nwant %d", strings.Join(got, "\n"), len(c.want))
			}
			for i, w := range c.want {
				if w = strings.Replace(w, "P:", path+":", 1); !strings.HasPrefix(got[i], w) {
					t.Errorf("warning %d = %q, want it to start with %q", i, got[i], w)
				}
			}
		})
	}
	// Problems are errors, as from Load.
	if _, _, err := Lint(write("bad.yaml", "bogus: 1\n")); err == nil || !strings.Contains(err.Error(), "bogus: unknown key") {
		t.Errorf("Lint of a bad file: %v", err)
	}
}

func TestCheckOffered(t *testing.T) {
	p := mustParse(t, `tools:
  - {match: read_file, namespace: docs, action: read}
  - {match: "write_*", namespace: docs, action: write}
  - {match: "*_file", namespace: files, action: any}
  - {match: delete_everything, namespace: x, action: y}
  - {match: "{list,search}_*", namespace: docs, action: read}
`)
	ws, unmatched := p.CheckOffered(Offered{Tools: []string{"read_file", "write_file", "get_time", "echo", "list_files"}})
	want := []string{
		`line 4: warning: tools[2].match: "*_file" matches "read_file", "write_file", but an earlier rule comes first for each`,
		`line 5: warning: tools[3].match: "delete_everything" matches none of the upstream's 5 tools`,
	}
	if got := warningLines(ws); !reflect.DeepEqual(got, want) {
		t.Errorf("warnings:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantU := []Unmatched{{"tools", "get_time", "mcp:get_time:*"}, {"tools", "echo", "mcp:echo:*"}}
	if !reflect.DeepEqual(unmatched, wantU) {
		t.Errorf("unmatched = %+v, want %+v", unmatched, wantU)
	}
	// An upstream with no tools: every rule is a warning.
	ws, unmatched = p.CheckOffered(Offered{})
	if len(ws) != 5 || len(unmatched) != 0 || !strings.Contains(ws[0].Msg, "matches none of the upstream's 0 tools") {
		t.Errorf("no tools: %v %v", warningLines(ws), unmatched)
	}
	// One tool matched by a later rule only: "it".
	ws, _ = mustParse(t, "tools:\n  - {match: \"*\", namespace: a, action: b}\n  - {match: \"g*\", namespace: a, action: c}\n").CheckOffered(Offered{Tools: []string{"get"}})
	if got := warningLines(ws); len(got) != 1 || !strings.HasSuffix(got[0], `"g*" matches "get", but an earlier rule comes first for it`) {
		t.Errorf("one tool: %v", got)
	}
}
