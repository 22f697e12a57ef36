package policy

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Match globs. A rule's match is an exact name or a glob in this syntax:
//
//	*       any run of characters (in a URI glob: other than '/')
//	**      any run of characters, '/' included
//	?       one character (in a URI glob: other than '/')
//	[abc]   one of the characters listed; [!abc] one not listed
//	[a-z]   one character in the range; [!a-z] one outside it
//	{a,b}   one of the comma-separated globs, which may nest
//	\c      the character c itself
//
// In a URI glob, no character class matches '/' either: only ** crosses a
// segment. Outside braces ',' is an ordinary character, and so is ']'
// outside a class; a '}' that closes nothing is an error, as is an
// unclosed '[' or '{' or a trailing '\'.
//
// A glob is translated to an anchored regular expression, so matching takes
// time linear in the name whatever the glob.

// globMeta are the characters with a meaning in a glob.
const globMeta = `*?[]{}\`

// maxGlobDepth bounds the nesting of braces.
const maxGlobDepth = 32

// isExact reports whether a match pattern has no glob syntax.
func isExact(pattern string) bool { return !strings.ContainsAny(pattern, globMeta) }

// quoteMeta escapes the glob syntax in s: the result is a glob that matches
// s alone.
func quoteMeta(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(globMeta, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// literalPrefix is the text every name a glob matches begins with: the glob
// up to its first wildcard, class or brace, unescaped.
func literalPrefix(pattern string) string {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '*', '?', '[', '{':
			return b.String()
		case '\\':
			if i+1 < len(pattern) {
				i++
				b.WriteByte(pattern[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// compileGlob compiles a glob. With uri set, '/' separates segments.
func compileGlob(pattern string, uri bool) (*regexp.Regexp, error) {
	if !utf8.ValidString(pattern) {
		return nil, errors.New("not valid UTF-8")
	}
	g := globParser{src: pattern, uri: uri}
	var b strings.Builder
	b.WriteString(`\A(?s:`)
	if err := g.sequence(&b, 0); err != nil {
		return nil, err
	}
	if g.pos < len(g.src) { // a '}' that closes nothing
		return nil, fmt.Errorf("'}' at byte %d closes no '{'; write \\} for the character", g.pos)
	}
	b.WriteString(`)\z`)
	return regexp.Compile(b.String())
}

type globParser struct {
	src string
	pos int
	uri bool
}

// sequence translates globs up to the end, or, inside braces (depth > 0),
// up to the ',' or '}' that ends the alternative.
func (g *globParser) sequence(b *strings.Builder, depth int) error {
	for g.pos < len(g.src) {
		r, w := utf8.DecodeRuneInString(g.src[g.pos:])
		switch r {
		case '*':
			g.pos++
			if strings.HasPrefix(g.src[g.pos:], "*") {
				g.pos++
				b.WriteString(`.*`)
			} else if g.uri {
				b.WriteString(`[^/]*`)
			} else {
				b.WriteString(`.*`)
			}
		case '?':
			g.pos++
			if g.uri {
				b.WriteString(`[^/]`)
			} else {
				b.WriteString(`.`)
			}
		case '[':
			if err := g.class(b); err != nil {
				return err
			}
		case '{':
			if depth == maxGlobDepth {
				return fmt.Errorf("braces nested deeper than %d", maxGlobDepth)
			}
			start := g.pos
			g.pos++
			b.WriteString(`(?:`)
			for {
				if err := g.sequence(b, depth+1); err != nil {
					return err
				}
				if g.pos == len(g.src) {
					return fmt.Errorf("the '{' at byte %d is not closed", start)
				}
				g.pos++
				if g.src[g.pos-1] == '}' {
					break
				}
				b.WriteByte('|')
			}
			b.WriteByte(')')
		case '}', ',':
			if depth > 0 || r == '}' {
				return nil // the caller reads it
			}
			g.pos++
			b.WriteString(`,`)
		case '\\':
			g.pos++
			if g.pos == len(g.src) {
				return errors.New(`a trailing '\' escapes nothing; write \\ for the character`)
			}
			r, w = utf8.DecodeRuneInString(g.src[g.pos:])
			g.pos += w
			b.WriteString(regexp.QuoteMeta(string(r)))
		default:
			g.pos += w
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	return nil
}

// class translates [abc], [a-z] and their negations [!…]. A class is one
// range or a list of characters, in which \ escapes and '-' may stand first
// or last; "[a-z0-9]" is refused rather than read as a list.
func (g *globParser) class(b *strings.Builder) error {
	start := g.pos
	g.pos++ // '['
	negate := strings.HasPrefix(g.src[g.pos:], "!")
	if negate {
		g.pos++
	}
	var chars []rune
	escaped := map[int]bool{}
	for {
		if g.pos == len(g.src) {
			return fmt.Errorf("the '[' at byte %d is not closed", start)
		}
		r, w := utf8.DecodeRuneInString(g.src[g.pos:])
		g.pos += w
		if r == ']' {
			break
		}
		if r == '\\' {
			if g.pos == len(g.src) {
				return fmt.Errorf("the '[' at byte %d is not closed", start)
			}
			r, w = utf8.DecodeRuneInString(g.src[g.pos:])
			g.pos += w
			escaped[len(chars)] = true
		}
		chars = append(chars, r)
	}
	var ranges [][2]rune
	switch {
	case len(chars) == 0:
		return fmt.Errorf("the class at byte %d is empty", start)
	case len(chars) == 3 && chars[1] == '-' && !escaped[1]:
		if chars[0] > chars[2] {
			return fmt.Errorf("the range %c-%c at byte %d is backwards", chars[0], chars[2], start)
		}
		ranges = append(ranges, [2]rune{chars[0], chars[2]})
	default:
		for i, c := range chars {
			if c == '-' && !escaped[i] && i > 0 && i < len(chars)-1 {
				return fmt.Errorf("the class at byte %d is neither one range such as [a-z] nor a list such as [abc]; "+
					"write \\- for the character and {[a-z],[0-9]} for several ranges", start)
			}
			ranges = append(ranges, [2]rune{c, c})
		}
	}
	if g.uri {
		// No class matches a separator: cut '/' out of a listed class, add
		// it to a negated one.
		if negate {
			ranges = append(ranges, [2]rune{'/', '/'})
		} else {
			var cut [][2]rune
			for _, rg := range ranges {
				if rg[0] < '/' {
					cut = append(cut, [2]rune{rg[0], min(rg[1], '/'-1)})
				}
				if rg[1] > '/' {
					cut = append(cut, [2]rune{max(rg[0], '/'+1), rg[1]})
				}
			}
			if len(cut) == 0 {
				return fmt.Errorf("the class at byte %d matches only '/', which only ** matches in a URI glob", start)
			}
			ranges = cut
		}
	}
	b.WriteByte('[')
	if negate {
		b.WriteByte('^')
	}
	for _, rg := range ranges {
		fmt.Fprintf(b, `\x{%x}`, rg[0])
		if rg[1] != rg[0] {
			fmt.Fprintf(b, `-\x{%x}`, rg[1])
		}
	}
	b.WriteByte(']')
	return nil
}
