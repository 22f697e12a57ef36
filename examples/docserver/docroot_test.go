package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	tests := []struct {
		in, want string
		escapes  bool
	}{
		{in: "/", want: "."},
		{in: "", want: "."},
		{in: ".", want: "."},
		{in: "/project/sub/notes.md", want: "project/sub/notes.md"},
		{in: "project/sub/notes.md", want: "project/sub/notes.md"},
		{in: "//project///sub/./notes.md", want: "project/sub/notes.md"},
		{in: "/project/sub/../README.md", want: "project/README.md"},
		{in: "/project/..", want: "."},
		{in: "/..", escapes: true},
		{in: "..", escapes: true},
		{in: "../outside", escapes: true},
		{in: "/project/../../etc/passwd", escapes: true},
		{in: "/project/sub/../../../x", escapes: true},
		{in: "/a/b/../../..", escapes: true},
	}
	for _, tt := range tests {
		got, err := resolve(tt.in)
		if tt.escapes {
			if !errors.Is(err, errEscapesRoot) {
				t.Errorf("resolve(%q) = %q, %v; want errEscapesRoot", tt.in, got, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("resolve(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if _, err := resolve("/project/a\x00b"); err == nil {
		t.Error("resolve accepted a NUL byte")
	}
}

// linkedRoot is a copy of testdata with symbolic links that stay inside the
// root and links that leave it, next to a directory outside the root.
func linkedRoot(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	outside = filepath.Join(base, "outside")
	copyDir(t, "testdata", root)
	mustWrite(t, filepath.Join(outside, "secret.txt"), "outside the root\n")
	project := filepath.Join(root, "project")
	links := map[string]string{
		"link-in.md":  "sub/notes.md",                         // relative, stays inside
		"link-out.md": "../../outside/secret.txt",             // relative, leaves
		"abs-out.md":  filepath.Join(outside, "secret.txt"),   // absolute, leaves
		"abs-in.md":   filepath.Join(project, "sub/notes.md"), // absolute: os.Root refuses every absolute link
		"dir-out":     "../../outside",                        // a directory outside
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(project, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

func TestDocRootRefusesEscapes(t *testing.T) {
	root, outside := linkedRoot(t)
	docs, err := openDocRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer docs.Close()

	for _, p := range []string{
		"/../outside/secret.txt",
		"../outside/secret.txt",
		"/project/../../outside/secret.txt",
		"/project/link-out.md",
		"/project/abs-out.md",
		"/project/abs-in.md",
		"/project/dir-out/secret.txt",
	} {
		if text, err := docs.readFile(p); !errors.Is(err, errEscapesRoot) {
			t.Errorf("readFile(%q) = %q, %v; want errEscapesRoot", p, text, err)
		}
	}
	if _, err := docs.listDir("/project/dir-out"); !errors.Is(err, errEscapesRoot) {
		t.Errorf("listDir through a link out: %v; want errEscapesRoot", err)
	}
	for _, p := range []string{"/project/dir-out/planted.md", "/project/dir-out/new/planted.md", "/../planted.md"} {
		if _, err := docs.writeFile(p, "x"); !errors.Is(err, errEscapesRoot) {
			t.Errorf("writeFile(%q): %v; want errEscapesRoot", p, err)
		}
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("outside the root now holds %d entries, want only secret.txt", len(entries))
	}
	if _, _, err := docs.search("x", "/project/dir-out"); !errors.Is(err, errEscapesRoot) {
		t.Errorf("search under a link out: %v; want errEscapesRoot", err)
	}
	matches, _, err := docs.search("outside the root", "/")
	if err != nil || len(matches) != 0 {
		t.Errorf("search found %v, %v through links out of the root", matches, err)
	}

	text, err := docs.readFile("/project/link-in.md")
	if err != nil || !strings.Contains(text, "Weekly sync") {
		t.Errorf("a relative link inside the root: %q, %v", text, err)
	}
}

func TestDocRootSearch(t *testing.T) {
	root := t.TempDir()
	copyDir(t, "testdata", root)
	docs, err := openDocRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer docs.Close()

	matches, truncated, err := docs.search("LATENCY BUDGET", "/project")
	if err != nil || truncated {
		t.Fatal(err, truncated)
	}
	want := []match{
		{Path: "/project/sub/notes.md", Line: 4, Text: "2025-03-10: Latency budget for a query is 200 ms at p99."},
		{Path: "/project/sub/plan.md", Line: 4, Text: "2. Run the load test against staging; the latency budget is 200 ms at p99."},
	}
	if fmt.Sprint(matches) != fmt.Sprint(want) {
		t.Errorf("search = %v\nwant %v", matches, want)
	}

	var many strings.Builder
	for i := range maxSearchMatches + 20 {
		fmt.Fprintf(&many, "needle %d\n", i)
	}
	mustWrite(t, filepath.Join(root, "many.txt"), many.String())
	mustWrite(t, filepath.Join(root, "binary.bin"), "needle\x00")
	mustWrite(t, filepath.Join(root, "long.txt"), "needle"+strings.Repeat("é", 2*maxSearchLineRunes))
	matches, truncated, err = docs.search("needle", "/")
	if err != nil {
		t.Fatal(err)
	}
	if !truncated || len(matches) != maxSearchMatches {
		t.Errorf("search returned %d matches, truncated=%v; want %d, true", len(matches), truncated, maxSearchMatches)
	}
	for _, m := range matches {
		if m.Path == "/binary.bin" {
			t.Error("search looked inside a binary file")
		}
		if m.Path == "/long.txt" && !strings.HasSuffix(m.Text, "…") {
			t.Errorf("long line not clipped: %d bytes", len(m.Text))
		}
	}

	if _, _, err := docs.search("", "/"); err == nil {
		t.Error("search accepted an empty query")
	}
	if _, _, err := docs.search("x", "/nowhere"); err == nil {
		t.Error("search accepted a missing path")
	}
}

func TestBigText(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 65, 1000, 1 << 20} {
		got := bigText(n)
		if len(got) != n {
			t.Errorf("len(bigText(%d)) = %d", n, len(got))
		}
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
		want    config
	}{
		{args: []string{"--root", "/d"}, want: config{root: "/d"}},
		{args: []string{"--root=/d", "--diagnostics", "--page-size", "3"}, want: config{root: "/d", diagnostics: true, pageSize: 3}},
		{args: nil, wantErr: "--root DIR is required"},
		{args: []string{"--root", "/d", "extra"}, wantErr: "unexpected arguments"},
		{args: []string{"--root", "/d", "--page-size", "-1"}, wantErr: "must not be negative"},
		{args: []string{"--bogus"}, wantErr: "flag provided but not defined"},
		{args: []string{"--root", "/d", "--describe", "read_file=Read, then mail it", "--rename", "search=find", "--describe", "greeting=Hi"},
			want: config{root: "/d", describe: nameValue{{"read_file", "Read, then mail it"}, {"greeting", "Hi"}}, rename: nameValue{{"search", "find"}}}},
		{args: []string{"--root", "/d", "--describe", "no equals sign"}, wantErr: "want NAME=VALUE"},
		{args: []string{"--root", "/d", "--rename", "=x"}, wantErr: "want NAME=VALUE"},
	}
	for _, tt := range tests {
		got, err := parseFlags(tt.args, io.Discard)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseFlags(%q) error = %v; want %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseFlags(%q) = %+v, %v; want %+v", tt.args, got, err, tt.want)
		}
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
