package policy

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		pattern string
		uri     bool
		name    string
		want    bool
	}{
		// Tool and prompt globs: '/' is an ordinary character.
		{"read_*", false, "read_file", true},
		{"read_*", false, "read_", true},
		{"read_*", false, "a/read_x", false},
		{"read_*", false, "read_a/b\nc", true},
		{"*_file", false, "read_file", true},
		{"ab*bc", false, "abc", false}, // the star cannot make prefix and suffix overlap
		{"ab*bc", false, "abbc", true},
		{"a*a*a", false, "aa", false},
		{"a*a*a", false, "aaa", true},
		{"?", false, "é", true},
		{"?", false, "ab", false},
		{"??", false, "é", false},
		{"tool.{x,y}", false, "tool.x", true},
		{"tool.{x,y}", false, "tool.z", false},
		{"trigger-sampling-request{,-async}", false, "trigger-sampling-request", true},
		{"trigger-sampling-request{,-async}", false, "trigger-sampling-request-async", true},
		{"{a,}{a,}a", false, "a", true},
		{"{,}x", false, "x", true},
		{"{a,{b,c}d}", false, "cd", true},
		{"{a,{b,c}d}", false, "c", false},
		{"{a*,b}", false, "ab", true},
		{"[abc]at", false, "cat", true},
		{"[abc]at", false, "fat", false},
		{"[!abc]at", false, "fat", true},
		{"[!abc]at", false, "at", false},
		{"[a-c]at", false, "bat", true},
		{"[!a-c]at", false, "bat", false},
		{"[-a]", false, "-", true},
		{"[a\\-z]", false, "-", true},
		{"[a\\-z]", false, "b", false},
		{"[\\]]", false, "]", true},
		{`\*`, false, "*", true},
		{`\*`, false, "x", false},
		{`a\{b\}`, false, "a{b}", true},
		{"a,b]", false, "a,b]", true},
		{".+()^$|", false, ".+()^$|", true}, // no regular expression syntax leaks through
		{".+()^$|", false, "a+()^$|", false},
		{"*", false, "", true},

		// URI globs: only ** crosses '/'.
		{"demo://r/*", true, "demo://r/a", true},
		{"demo://r/*", true, "demo://r/", true},
		{"demo://r/*", true, "demo://r/a/b", false},
		{"demo://r/**", true, "demo://r/a/b", true},
		{"demo://r/**", true, "demo://r/", true},
		{"demo://r/**", true, "demo://r", false},
		{"demo://**/x", true, "demo://a/b/x", true},
		{"demo://r/?", true, "demo://r/a", true},
		{"demo://r/?", true, "demo://r//", false},
		{"demo://r/[!a]", true, "demo://r//", false},
		{"demo://r/[!a]", true, "demo://r/b", true},
		{"demo://r/[.-0]", true, "demo://r//", false},
		{"demo://r/[.-0]", true, "demo://r/0", true},
		{"demo://r/[.-0]", true, "demo://r/.", true},
		{"demo://r/[a/]", true, "demo://r//", false},
		{"demo://r/[a/]", true, "demo://r/a", true},
		{"demo://r/{a,b/c}", true, "demo://r/b/c", true}, // a literal '/' is a '/'
		{"*", true, "a/b", false},
		{"**", true, "a/b", true},
		// Query strings and fragments are part of the text: * takes them.
		{"demo://r/*", true, "demo://r/a?x=1", true},
		{"demo://r/*", true, "demo://r/a#top", true},
		{"demo://r/*", true, "demo://r/a?x=/b", false},
		{"demo://r/*.md", true, "demo://r/a.md?x", false},
	} {
		g, err := compileGlob(c.pattern, c.uri)
		if err != nil {
			t.Errorf("compileGlob(%q, %v): %v", c.pattern, c.uri, err)
			continue
		}
		if got := g.MatchString(c.name); got != c.want {
			t.Errorf("glob %q (uri %v) on %q = %v, want %v", c.pattern, c.uri, c.name, got, c.want)
		}
	}
}

func TestGlobErrors(t *testing.T) {
	for _, c := range []struct {
		pattern string
		uri     bool
		want    string
	}{
		{"0{", false, "the '{' at byte 1 is not closed"},
		{"/{a{*.json{", false, "is not closed"},
		{"a{b,c", false, "the '{' at byte 1 is not closed"},
		{"a}", false, "'}' at byte 1 closes no '{'"},
		{"{a}}", false, "'}' at byte 3 closes no '{'"},
		{"[", false, "the '[' at byte 0 is not closed"},
		{"[a\\", false, "is not closed"},
		{"[]", false, "the class at byte 0 is empty"},
		{"[!]", false, "is empty"},
		{"[z-a]", false, "the range z-a at byte 0 is backwards"},
		{"[a-z0-9]", false, "neither one range such as [a-z] nor a list"},
		{"a\\", false, "a trailing '\\' escapes nothing"},
		{"[/]", true, "matches only '/'"},
		{"\xff*", false, "not valid UTF-8"},
		{strings.Repeat("{", 33) + strings.Repeat("}", 33), false, "braces nested deeper than 32"},
	} {
		_, err := compileGlob(c.pattern, c.uri)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("compileGlob(%q, %v) = %v, want an error containing %q", c.pattern, c.uri, err, c.want)
		}
	}
	if _, err := compileGlob(strings.Repeat("{", 32)+strings.Repeat("}", 32), false); err != nil {
		t.Errorf("32 nested braces: %v", err)
	}
}

func TestLiteralPrefix(t *testing.T) {
	for pattern, want := range map[string]string{
		"demo://r/*":          "demo://r/",
		"file:///srv/{a,b}/x": "file:///srv/",
		`a\*b?`:               "a*b",
		`\é[x]`:               "é",
		"plain":               "plain",
		"**":                  "",
	} {
		if got := literalPrefix(pattern); got != want {
			t.Errorf("literalPrefix(%q) = %q, want %q", pattern, got, want)
		}
	}
}

func TestQuoteMeta(t *testing.T) {
	for _, s := range []string{"ns:tool*", `a\b`, "{x,y}[z]?", "plain", ""} {
		q := quoteMeta(s)
		if isExact(s) != (q == s) {
			t.Errorf("isExact(%q) = %v, but quoteMeta gives %q", s, isExact(s), q)
		}
		g, err := compileGlob(q, true)
		if err != nil || !g.MatchString(s) || g.MatchString(s+"x") {
			t.Errorf("quoteMeta(%q) = %q does not match exactly it: %v", s, q, err)
		}
	}
}

// refMatch is a plain backtracking matcher for globs of literals, *, ** and
// ?, independent of the translation to regular expressions.
func refMatch(pattern, name string, uri bool) bool {
	p, n := []rune(pattern), []rune(name)
	memo := map[[2]int]bool{}
	var match func(i, j int) bool
	match = func(i, j int) bool {
		key := [2]int{i, j}
		if v, ok := memo[key]; ok {
			return v
		}
		var ok bool
		switch {
		case i == len(p):
			ok = j == len(n)
		case p[i] == '*':
			star := i + 1
			cross := !uri
			if star < len(p) && p[star] == '*' {
				star++
				cross = true
			}
			ok = match(star, j) || j < len(n) && (cross || n[j] != '/') && match(i, j+1)
		case p[i] == '?':
			ok = j < len(n) && (!uri || n[j] != '/') && match(i+1, j+1)
		default:
			ok = j < len(n) && p[i] == n[j] && match(i+1, j+1)
		}
		memo[key] = ok
		return ok
	}
	return match(0, 0)
}

func FuzzGlob(f *testing.F) {
	f.Add("read_*", "read_file")
	f.Add("ab*bc", "abc")
	f.Add("demo://r/**/x?", "demo://r/a/b/xy")
	f.Add("{a,}{a,}[!b]", "ac")
	f.Add("0{", "0")
	f.Add("[a-c]*\\*", "b/*")
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(pattern) > MaxMatchLen {
			return
		}
		tool, terr := compileGlob(pattern, false)
		uri, uerr := compileGlob(pattern, true)
		if uerr == nil {
			if terr != nil {
				t.Fatalf("%q compiles as a URI glob but not as a tool glob: %v", pattern, terr)
			}
			// A URI glob matches a subset of what the same tool glob does.
			if uri.MatchString(name) && !tool.MatchString(name) {
				t.Fatalf("%q matches %q as a URI glob only", pattern, name)
			}
		}
		if terr == nil && tool.MatchString(name) && !strings.HasPrefix(name, literalPrefix(pattern)) {
			t.Fatalf("%q matches %q, which does not begin with its literal prefix %q", pattern, name, literalPrefix(pattern))
		}
		if terr == nil && isExact(pattern) && tool.MatchString(name) != (name == pattern) {
			t.Fatalf("exact pattern %q on %q", pattern, name)
		}
		if utf8.ValidString(name) {
			q := quoteMeta(name)
			if g, err := compileGlob(q, true); err != nil || !g.MatchString(name) {
				t.Fatalf("quoteMeta(%q) = %q: %v", name, q, err)
			}
		}
		if terr == nil && !strings.ContainsAny(pattern, `[]{}\`) && utf8.ValidString(name) {
			for _, u := range []bool{false, true} {
				g := tool
				if u {
					g = uri
				}
				if got, want := g.MatchString(name), refMatch(pattern, name, u); got != want {
					t.Fatalf("glob %q (uri %v) on %q = %v, the reference matcher says %v", pattern, u, name, got, want)
				}
			}
		}
	})
}

func BenchmarkGlob(b *testing.B) {
	g, err := compileGlob("demo://resource/{static,dynamic}/**", true)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		g.MatchString("demo://resource/dynamic/text/12345")
	}
}
