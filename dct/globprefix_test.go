package dct

import (
	"strings"
	"testing"
)

func TestMatchResourcePrefix(t *testing.T) {
	long := strings.Repeat("x", MaxResourceLen)
	for _, c := range []struct {
		pattern, prefix string
		want            bool
	}{
		{"*", "anything/../at all", true},
		{"**", "", true},

		// URI templates' literal prefixes.
		{"demo://resource/dynamic/**", "demo://resource/dynamic/text/", true},
		{"demo://resource/dynamic/text/*", "demo://resource/dynamic/text/", true},
		{"demo://resource/dynamic/*", "demo://resource/dynamic/text/", false}, // one segment, and text/ already is one
		{"demo://resource/static/**", "demo://resource/dynamic/text/", false},
		{"demo://resource/dynamic/text/1", "demo://resource/dynamic/text/", true},
		{"demo://resource/dynamic/text/1", "demo://resource/dynamic/te", true},
		{"demo://resource/dynamic/text/1", "demo://resource/dynamic/tex/", false},
		{"demo://**", "demo:", true},
		{"demo://**", "demo:/", true},
		{"demo://**", "demo://", true},
		{"demo://**", "demox", false},
		{"*://x/**", "file://x/", false}, // "*:" is a literal segment
		{"*://x/**", "*:/", true},
		{"/a/*", "", true},
		{"/a/*", "/", true},
		{"/a/*", "/b", false},

		// The open segment may be extended, whole ones may not.
		{"/a/bc/*", "/a/b", true},
		{"/a/bc/*", "/a/b/", false},
		{"/a/*/c", "/a/", true},
		{"/a/*/c", "/a/x/c", true},
		{"/a/*/c", "/a/x/d", false},
		{"/a/*/c", "/a/x/c/", false},
		{"/a/**", "/a/x/y/z", true},
		{"/a/**/z", "/a/x/y/", true},
		{"/a/**/z", "/a/x/y/q", true}, // "q" may become a middle segment: "/a/x/y/q/z"

		// Wildcards never take a dot or empty segment, whole or finished.
		{"/a/*", "/a/..", true}, // "..x" is a segment "*" matches
		{"/a/*/b", "/a/../", false},
		{"/a/**", "/a/../", false},
		{"/a/**", "/a/./x", false},
		{"/a/*/*", "/a//", false},
		{"/a/**", "/a//", false},
		{"/a/../*", "/a/../", true}, // named literally
		{"/a/**", "/a/", true},      // "/a/" itself: "**" takes the empty last segment

		// The length limit: the shortest resource must fit.
		{"/*", "/" + long[:MaxResourceLen-1], true},
		{"/*/b", "/" + long[:MaxResourceLen-1], false}, // "/xxx…/b" is over the limit
		{"/**", "/" + long, false},
		{"/" + long, "/x", true}, // a pattern over the limit matches itself only
		{"/" + long, "/y", false},
	} {
		got := MatchResourcePrefix(c.pattern, c.prefix)
		if got != c.want {
			t.Errorf("MatchResourcePrefix(%q, %q) = %v, want %v", short(c.pattern), short(c.prefix), got, c.want)
		}
		checkWitness(t, c.pattern, c.prefix)
	}
}

func short(s string) string {
	if len(s) > 40 {
		return s[:20] + "…" + s[len(s)-10:]
	}
	return s
}

// checkWitness checks that a positive answer is backed by a resource that
// begins with the prefix and that MatchResource accepts.
func checkWitness(t *testing.T, pattern, prefix string) {
	t.Helper()
	w, ok := resourcePrefixWitness(pattern, prefix)
	if !ok {
		return
	}
	if !strings.HasPrefix(w, prefix) || !MatchResource(pattern, w) {
		t.Fatalf("pattern %q, prefix %q: the witness %q does not begin with it or does not match", pattern, prefix, w)
	}
}

// Every prefix of every resource a pattern matches, for all small patterns
// and resources: MatchResourcePrefix never hides what could be granted, and
// each positive answer has a witness.
func TestMatchResourcePrefixExhaustive(t *testing.T) {
	segs := []string{"a", "*", "**", "", ".."}
	var patterns []string
	var build func(parts []string)
	build = func(parts []string) {
		if len(parts) > 0 {
			patterns = append(patterns, strings.Join(parts, "/"))
		}
		if len(parts) == 3 {
			return
		}
		for _, s := range segs {
			build(append(parts, s))
		}
	}
	build(nil)
	var resources []string
	var grow func(s string)
	grow = func(s string) {
		resources = append(resources, s)
		if len(s) == 5 {
			return
		}
		for _, c := range []string{"a", "/", ".", "x"} {
			grow(s + c)
		}
	}
	grow("")
	matched := 0
	for _, pattern := range patterns {
		for _, r := range resources {
			checkWitness(t, pattern, r)
			if !MatchResource(pattern, r) {
				continue
			}
			matched++
			for i := 0; i <= len(r); i++ {
				if !MatchResourcePrefix(pattern, r[:i]) {
					t.Fatalf("%q matches %q, but MatchResourcePrefix(%q, %q) is false", pattern, r, pattern, r[:i])
				}
			}
		}
	}
	if matched < 1000 {
		t.Fatalf("only %d matching pairs: the test exercises too little", matched)
	}
}

func FuzzMatchResourcePrefix(f *testing.F) {
	f.Add("demo://resource/dynamic/**", "demo://resource/dynamic/text/1")
	f.Add("/a/**/b/*/c", "/a/x/y/b/z/c")
	f.Add("/a/*", "/a/../x")
	f.Add("**/x", "y/x")
	f.Fuzz(func(t *testing.T, pattern, resource string) {
		checkWitness(t, pattern, resource)
		if !MatchResource(pattern, resource) {
			return
		}
		for i := 0; i <= len(resource); i++ {
			if !MatchResourcePrefix(pattern, resource[:i]) {
				t.Fatalf("%q matches %q, but MatchResourcePrefix(%q, %q) is false", pattern, resource, pattern, resource[:i])
			}
		}
	})
}

func BenchmarkMatchResourcePrefix(b *testing.B) {
	for b.Loop() {
		MatchResourcePrefix("demo://resource/**/text/*", "demo://resource/dynamic/text/")
	}
}
