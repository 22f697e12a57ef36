package dct

import (
	"strings"
	"testing"
)

func TestMatchResource(t *testing.T) {
	long := "/" + strings.Repeat("x", MaxResourceLen)
	for _, c := range []struct {
		pattern, resource string
		want              bool
	}{
		// A bare * or ** matches anything, dot segments included.
		{"*", "", true},
		{"*", "/project/a/b", true},
		{"*", "/project/../secret", true},
		{"**", "anything at all", true},
		{"**", long, true},

		// * is exactly one segment.
		{"/project/*", "/project/foo", true},
		{"/project/*", "/project/foo/bar", false},
		{"/project/*", "/project", false},
		{"/project/*", "/project/", false},             // "*" never matches an empty segment (the directory itself)
		{"/project/*/*", "/project//secret.md", false}, // nor an empty one inside: a server reads "/project/secret.md"
		{"/project/**", "/project//secret.md", false},
		{"/project/*", "/project/..", false},
		{"/project/*", "/project/.", false},
		{"/project/*", "/project/.hidden", true},
		{"/project/*", "/projectX/foo", false},
		{"/a/*/b", "/a/x/b", true},
		{"/a/*/b", "/a/b", false},
		{"/a/*/b", "/a/x/y/b", false},
		{"/a/*/b", "/a/../b", false},

		// ** is zero or more segments.
		{"/project/**", "/project", true},
		{"/project/**", "/project/", true},
		{"/project/**", "/project/foo", true},
		{"/project/**", "/project/foo/bar/baz", true},
		{"/project/**", "/projectX", false},
		{"/project/**", "/projectX/foo", false},
		{"/project/**", "/", false},
		{"/project/**", "project/foo", false},
		{"/project/**", "/Project/foo", false},
		{"/**", "/", true},
		{"/**", "", true},
		{"/a/**/b", "/a/b", true},
		{"/a/**/b", "/a/x/y/b", true},
		{"/a/**/b", "/a/b/c", false},
		{"/a/**/b", "/a/x/b/y/b", true},
		{"/**/a/**/b", "/a/b", true},
		{"/**/a/**/b", "/x/a/y/z/b", true},
		{"/**/a/**/b", "/x/a/y/z/c", false},
		{"**/secret", "x/y/secret", true},
		{"**/secret", "/x/secret", true},
		{"/a/**/**", "/a", true},
		{"/a/**/*", "/a", false},
		{"/a/**/*", "/a/b", true},

		// Wildcards never match a dot segment, however they are combined.
		{"/project/**", "/project/../secret", false},
		{"/project/**", "/project/a/../../secret", false},
		{"/project/**", "/project/./a", false},
		{"/project/**", "/project/..", false},
		{"/project/**", "/project/...", true},
		{"/project/**/x", "/project/../x", false},
		{"/**/x", "/../x", false},

		// Anything else is literal, including '*' inside a segment.
		{"/project/file", "/project/file", true},
		{"/project/file", "/project/file2", false},
		{"/project/file", "/project/file/", false},
		{"/project/", "/project", false},
		{"/project/*.go", "/project/main.go", false},
		{"/project/*.go", "/project/*.go", true},
		{"a*", "abc", false},
		{"", "", true},
		{"", "/", false},
		{"/a/../b", "/a/../b", true},
		{"/a/../*", "/a/../b", true},
		{"/a/../*", "/a/../..", false},
		{"/a/./b", "/a/./b", true},

		// Over-long input is matched only exactly.
		{"/**", long, false},
		{long, long, true},
		{long + "/..", long + "/..", false},
		{long + "/*", long + "/a", false},
	} {
		if got := MatchResource(c.pattern, c.resource); got != c.want {
			t.Errorf("MatchResource(%.40q, %.40q) = %v, want %v", c.pattern, c.resource, got, c.want)
		}
		if got := refMatchResource(c.pattern, c.resource); got != c.want {
			t.Errorf("reference matcher disagrees with the table for (%.40q, %.40q)", c.pattern, c.resource)
		}
	}
}

func TestResourceSubset(t *testing.T) {
	long := "/" + strings.Repeat("x", MaxResourceLen+10)
	deep := strings.Repeat("/a", MaxResourceSegments)
	for _, c := range []struct {
		child, parent string
		want          bool
	}{
		{"/project/sub/*", "/project/**", true},
		{"/project/sub/**", "/project/**", true},
		{"/project/**", "/project/**", true},
		{"/project/*", "/project/*", true},
		{"/project/a", "/project/*", true},
		{"/project/a", "/project/a", true},
		{"/project/*/**", "/project/**", true},
		{"/a/*/b", "/a/**", true},
		{"/a/**/b", "/a/**", true},
		{"/a/b", "/a/b/**", true},
		{"/a", "/a/**", true},
		{"/a/*.txt", "/a/*", true},
		{"/a/../b", "/a/../b", true},
		{"/a/../b", "/a/../*", true},
		{"", "", true},
		{"", "/**", true},
		{"/", "/**", true},
		{"/a/b", "/**/b", true},
		{"/x/a/y/b", "/**/a/**/b", true},

		// A bare * parent contains everything; a bare child is contained
		// only by a bare parent.
		{"/project/**", "*", true},
		{"anything/../x", "*", true},
		{"*", "*", true},
		{"**", "*", true},
		{"*", "**", true},
		{"*", "/**", false},
		{"**", "/**", false},
		{"**", "/project/**", false},

		{"/projectX-secret/**", "/project/**", false},
		{"/projectX/a", "/project/*", false},
		{"/project/**", "/project/*", false},
		{"/project/**", "/project/*/**", false},
		{"/a/**", "/a/*", false},
		{"/a/**/b", "/a/*/b", false},
		{"/a/*", "/a/b", false},
		{"/a/**", "/a/**/b", false},
		{"/a/x", "/a/*.txt", false},
		{"/a/../b", "/a/**", false},
		{"/a/./b", "/a/*/b", false},
		{"/a/*", "/a/..", false},
		{"/a/b", "/a", false},
		{"/a/b/**", "/a/b", false},
		{"/", "", false},
		{"", "/", false},
		{"/a/**/b/**", "/a/**/b", false},

		// Inclusion is proved only within the decoding limits.
		{long, long, true},
		{long + "/y", long + "/**", false},
		{long + "/y", "/**", false},
		{deep, "/**", false},
		{deep[2:], "/**", true},
	} {
		if got := ResourceSubset(c.child, c.parent); got != c.want {
			t.Errorf("ResourceSubset(%.40q, %.40q) = %v, want %v", c.child, c.parent, got, c.want)
		}
	}
}

func TestCapabilitySubsetAndCovers(t *testing.T) {
	read := Capability{"docs", "read", "/project/**"}
	for _, c := range []struct {
		child, parent Capability
		want          bool
	}{
		{Capability{"docs", "read", "/project/a"}, read, true},
		{read, read, true},
		{Capability{"docs", "write", "/project/a"}, read, false},
		{Capability{"web", "read", "/project/a"}, read, false},
		{Capability{"*", "read", "/project/a"}, read, false},
		{Capability{"docs", "*", "/project/a"}, read, false},
		{Capability{"docs", "read", "/other"}, read, false},
		{Capability{"docs", "read", "/project/a"}, Capability{"*", "*", "*"}, true},
		{Capability{"*", "*", "*"}, Capability{"*", "*", "*"}, true},
		{Capability{"*", "*", "/a"}, Capability{"*", "*", "/**"}, true},
		{Capability{"docs", "read", "/a"}, Capability{"docs", "*", "/**"}, true},
		{Capability{"Docs", "read", "/project/a"}, read, false},
	} {
		if got := c.child.SubsetOf(c.parent); got != c.want {
			t.Errorf("%s.SubsetOf(%s) = %v, want %v", c.child, c.parent, got, c.want)
		}
	}
	for _, c := range []struct {
		cap                         Capability
		namespace, action, resource string
		want                        bool
	}{
		{read, "docs", "read", "/project/a", true},
		{read, "docs", "read", "/other", false},
		{read, "docs", "write", "/project/a", false},
		{read, "web", "read", "/project/a", false},
		{read, "*", "*", "/project/a", false},
		{Capability{"*", "*", "*"}, "web", "search", "q", true},
		{Capability{"*", "read", "*"}, "web", "search", "q", false},
		{Capability{"docs", "*", "/project/**"}, "docs", "delete", "/project/x", true},
	} {
		if got := c.cap.Covers(c.namespace, c.action, c.resource); got != c.want {
			t.Errorf("%s.Covers(%s, %s, %s) = %v, want %v", c.cap, c.namespace, c.action, c.resource, got, c.want)
		}
	}
}

// refMatch is a direct recursive reading of the matching rules, to check
// the iterative matcher against. It is exponential, so only for short input.
func refMatch(p, r []string) bool { return refMatchAt(p, r, len(r)) }

// refMatchAt matches p against r, the last len(r) of n segments.
func refMatchAt(p, r []string, n int) bool {
	if len(p) == 0 {
		return len(r) == 0
	}
	i := n - len(r)
	switch p[0] {
	case "**":
		return refMatchAt(p[1:], r, n) || len(r) > 0 && wildOK(r[0], i, n, true) && refMatchAt(p, r[1:], n)
	case "*":
		return len(r) > 0 && wildOK(r[0], i, n, false) && refMatchAt(p[1:], r[1:], n)
	default:
		return len(r) > 0 && p[0] == r[0] && refMatchAt(p[1:], r[1:], n)
	}
}

func refMatchResource(pattern, resource string) bool {
	if pattern == "*" || pattern == "**" {
		return true
	}
	if len(pattern) > MaxResourceLen || len(resource) > MaxResourceLen {
		return pattern == resource && !hasDotSegment(resource)
	}
	return refMatch(strings.Split(pattern, "/"), strings.Split(resource, "/"))
}

// globAlphabet is a small set of segments so that random patterns and
// resources collide often.
var globAlphabet = []string{"", "a", "b", "*", "**", "..", ".", "a*"}

// segments maps each byte to a segment of globAlphabet.
func segments(b string) string {
	s := make([]string, len(b))
	for i := range len(b) {
		s[i] = globAlphabet[int(b[i])%len(globAlphabet)]
	}
	return strings.Join(s, "/")
}

// allGlobs is every pattern of up to n segments over alphabet, plus the
// bare universal patterns.
func allGlobs(alphabet []string, n int) []string {
	out := []string{"*", "**"}
	level := []string{""}
	for i := 1; i <= n; i++ {
		var next []string
		for _, p := range level {
			for _, s := range alphabet {
				if i == 1 {
					next = append(next, s)
				} else {
					next = append(next, p+"/"+s)
				}
			}
		}
		out = append(out, next...)
		level = next
	}
	return out
}

// TestResourceSubsetSoundExhaustive checks every pair of short patterns
// against every short resource: when ResourceSubset says yes, no resource
// is matched by the child and not the parent.
func TestResourceSubsetSoundExhaustive(t *testing.T) {
	patterns := allGlobs([]string{"", "a", "*", "**", ".."}, 3)
	resources := allGlobs([]string{"", "a", "b", "..", "."}, 4)
	matches := make([][]uint64, len(patterns))
	for i, p := range patterns {
		matches[i] = make([]uint64, (len(resources)+63)/64)
		for j, r := range resources {
			m := MatchResource(p, r)
			if m != refMatchResource(p, r) {
				t.Fatalf("MatchResource(%q, %q) = %v, reference says otherwise", p, r, m)
			}
			if m {
				matches[i][j/64] |= 1 << (j % 64)
			}
		}
	}
	proved := 0
	for i, c := range patterns {
		for j, p := range patterns {
			if !ResourceSubset(c, p) {
				continue
			}
			proved++
			for w := range matches[i] {
				if extra := matches[i][w] &^ matches[j][w]; extra != 0 {
					for b := 0; b < 64; b++ {
						if extra&(1<<b) != 0 {
							t.Fatalf("ResourceSubset(%q, %q) but %q matches only the child", c, p, resources[w*64+b])
						}
					}
				}
			}
		}
	}
	if proved < len(patterns) {
		t.Fatalf("only %d inclusions proved among %d patterns", proved, len(patterns))
	}
}

func FuzzResourceSubset(f *testing.F) {
	for _, s := range [][3]string{
		{"/project/sub/*", "/project/**", "/project/sub/x"},
		{"/project/**", "/project/*", "/project/a/b"},
		{"/a/**/b", "/a/**", "/a/x/../b"},
		{"/a/../b", "/a/../*", "/a/../b"},
		{"**", "*", "/../x"},
		{"", "/**", ""},
		{"/**/a/**/b", "/**/b", "/x/a/y/b"},
		{"\x01\x04\x03", "\x01\x04", "\x01\x02\x05"},
		{"\x04\x04\x01", "\x04\x01\x04", "\x01\x01\x01"},
		{"\x03\x07", "\x03\x03", "\x00\x07"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, child, parent, resource string) {
		check := func(c, p, r string) {
			if !ResourceSubset(c, c) {
				t.Fatalf("ResourceSubset(%q, itself) = false", c)
			}
			if ResourceSubset(c, p) && MatchResource(c, r) && !MatchResource(p, r) {
				t.Fatalf("ResourceSubset(%q, %q) but %q matches only the child", c, p, r)
			}
		}
		check(child, parent, resource)
		if len(child) <= 12 && len(parent) <= 12 && len(resource) <= 12 {
			c, p, r := segments(child), segments(parent), segments(resource)
			check(c, p, r)
			if got, want := MatchResource(p, r), refMatchResource(p, r); got != want {
				t.Fatalf("MatchResource(%q, %q) = %v, reference %v", p, r, got, want)
			}
		}
	})
}
