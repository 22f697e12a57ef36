package verify

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// jsRegex is an ECMAScript regular expression translated to Go's RE2
// syntax. Only patterns whose translation means the same thing are
// accepted; the rest are refused with an error. See doc.go for the mapping.
type jsRegex struct {
	re      *regexp.Regexp
	unicode bool // the u flag: JavaScript matches by code point, as Go does
	fold    bool // the i flag
	// multiline is the m flag: JavaScript's ^ and $ then also match at
	// \r, U+2028 and U+2029, Go's only at \n.
	multiline bool
}

// compileJSRegex translates pattern and flags (the arguments of JavaScript's
// new RegExp) into a Go regexp.
func compileJSRegex(pattern, flags string) (*jsRegex, error) {
	if len(pattern) > MaxPatternLen {
		return nil, fmt.Errorf("pattern longer than %d bytes", MaxPatternLen)
	}
	if !utf8.ValidString(pattern) {
		return nil, errors.New("pattern is not valid UTF-8")
	}
	var f struct{ d, g, i, m, s, u, y bool }
	for _, c := range flags {
		var p *bool
		switch c {
		case 'd':
			p = &f.d
		case 'g':
			p = &f.g
		case 'i':
			p = &f.i
		case 'm':
			p = &f.m
		case 's':
			p = &f.s
		case 'u':
			p = &f.u
		case 'y':
			p = &f.y
		case 'v':
			return nil, errors.New("flag v (Unicode sets) is not supported")
		default:
			return nil, fmt.Errorf("unknown regular expression flag %q", c)
		}
		if *p {
			return nil, fmt.Errorf("flag %q given twice", c)
		}
		*p = true
	}
	t := translator{src: []rune(pattern), unicode: f.u, dotAll: f.s, legacyFold: f.i && !f.u}
	t.named = hasNamedGroups(pattern)
	body, err := t.translate()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	if f.i {
		b.WriteString("(?i)")
	}
	if f.m {
		b.WriteString("(?m)")
	}
	if f.y {
		// Sticky: one test() of a fresh RegExp must match at lastIndex 0.
		b.WriteString(`\A(?:` + body + ")")
	} else {
		b.WriteString(body)
	}
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, fmt.Errorf("pattern cannot be run: %w", err)
	}
	return &jsRegex{re: re, unicode: f.u, fold: f.i, multiline: f.m}, nil
}

// test is RegExp.prototype.test on a fresh RegExp (lastIndex 0, so the g
// flag changes nothing). Without the u flag JavaScript matches UTF-16 code
// units and folds case by toUpperCase; Go cannot, so an input where that
// would make a difference is an error rather than a guess.
func (r *jsRegex) test(s string) (bool, error) {
	if r.multiline {
		if strings.ContainsAny(s, "\r\u2028\u2029") {
			return false, fmt.Errorf("input has a line terminator other than \\n, where ^ and $ of the m flag differ in Go; match lines another way")
		}
	}
	if !r.unicode {
		for _, c := range s {
			if c > 0xFFFF {
				return false, fmt.Errorf("input has %U, outside the BMP: without the u flag JavaScript matches it as two UTF-16 code units; add the u flag", c)
			}
			if r.fold && foldsDifferently(c) {
				return false, fmt.Errorf("input has %U, which JavaScript case-folds differently without the u flag; add the u flag", c)
			}
		}
	}
	return r.re.MatchString(s), nil
}

// hasNamedGroups reports whether a pattern has a named group, which turns
// \k from an identity escape into a backreference in JavaScript.
func hasNamedGroups(p string) bool {
	for i := 0; ; {
		j := strings.Index(p[i:], "(?<")
		if j < 0 {
			return false
		}
		i += j + 3
		if i < len(p) && p[i] != '=' && p[i] != '!' {
			return true
		}
	}
}

// jsSpace is JavaScript's \s (WhiteSpace and LineTerminator), as the
// contents of a Go character class.
const jsSpace = `\t\n\x{b}\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}`

// jsNotSpace is the complement of jsSpace.
const jsNotSpace = `\x{0}-\x{8}\x{e}-\x{1f}\x{21}-\x{9f}\x{a1}-\x{167f}\x{1681}-\x{1fff}\x{200b}-\x{2027}\x{202a}-\x{202e}\x{2030}-\x{205e}\x{2060}-\x{2fff}\x{3001}-\x{fefe}\x{ff00}-\x{10ffff}`

// jsDot is . without the s flag: anything but a line terminator.
const jsDot = `[^\n\r\x{2028}\x{2029}]`

type translator struct {
	src     []rune
	pos     int
	out     strings.Builder
	unicode bool
	dotAll  bool
	named   bool
	names   map[string]bool
	// legacyFold is the i flag without u: JavaScript then folds case by
	// toUpperCase, which differs from Go's simple case folding for a few
	// hundred characters (foldsDifferently); patterns naming one are refused.
	legacyFold bool
}

func (t *translator) more() bool { return t.pos < len(t.src) }
func (t *translator) peek() rune { return t.src[t.pos] }
func (t *translator) next() rune { c := t.src[t.pos]; t.pos++; return c }
func (t *translator) at(s string) bool {
	r := []rune(s)
	if t.pos+len(r) > len(t.src) {
		return false
	}
	for i, c := range r {
		if t.src[t.pos+i] != c {
			return false
		}
	}
	return true
}

func (t *translator) errorf(format string, args ...any) error {
	return fmt.Errorf("pattern at offset %d: %s", t.pos, fmt.Sprintf(format, args...))
}

// translate walks the pattern once, emitting Go syntax. quantifiable is
// whether the last thing emitted may take a quantifier (JavaScript refuses
// a quantifier on nothing, an anchor or another quantifier).
func (t *translator) translate() (string, error) {
	depth := 0
	quantifiable := false
	for t.more() {
		c := t.next()
		switch c {
		case '^', '$':
			t.out.WriteRune(c)
			quantifiable = false
		case '|':
			t.out.WriteByte('|')
			quantifiable = false
		case '(':
			if err := t.group(); err != nil {
				return "", err
			}
			depth++
			quantifiable = false
		case ')':
			if depth == 0 {
				return "", t.errorf("unmatched ')'")
			}
			depth--
			t.out.WriteByte(')')
			quantifiable = true
		case '*', '+', '?':
			if !quantifiable {
				return "", t.errorf("nothing to repeat")
			}
			t.out.WriteRune(c)
			t.lazy()
			quantifiable = false
		case '{':
			q, ok, err := t.braces()
			if err != nil {
				return "", err
			}
			if ok {
				if !quantifiable {
					return "", t.errorf("nothing to repeat")
				}
				t.out.WriteString(q)
				t.lazy()
				quantifiable = false
				break
			}
			if t.unicode {
				return "", t.errorf("lone '{' (a syntax error with the u flag)")
			}
			t.out.WriteString(`\{`)
			quantifiable = true
		case '}', ']':
			if t.unicode {
				return "", t.errorf("lone %q (a syntax error with the u flag)", c)
			}
			t.out.WriteString(`\` + string(c))
			quantifiable = true
		case '.':
			if t.dotAll {
				t.out.WriteString(`(?s:.)`)
			} else {
				t.out.WriteString(jsDot)
			}
			quantifiable = true
		case '[':
			if err := t.class(); err != nil {
				return "", err
			}
			quantifiable = true
		case '\\':
			q, err := t.escape()
			if err != nil {
				return "", err
			}
			quantifiable = q
		default:
			if err := t.literal(c); err != nil {
				return "", err
			}
			quantifiable = true
		}
	}
	if depth != 0 {
		return "", t.errorf("unterminated group")
	}
	return t.out.String(), nil
}

// literal emits one pattern character.
func (t *translator) literal(c rune) error {
	if c > 0xFFFF && !t.unicode {
		return t.errorf("%U is outside the BMP: without the u flag JavaScript reads it as two code units; add the u flag", c)
	}
	if err := t.checkFold(c, c); err != nil {
		return err
	}
	t.out.WriteString(regexp.QuoteMeta(string(c)))
	return nil
}

// checkFold refuses, under legacyFold, a character or range that holds a
// character JavaScript would fold differently from Go.
func (t *translator) checkFold(lo, hi rune) error {
	if t.legacyFold {
		if c, ok := foldsDifferentlyIn(lo, hi); ok {
			return t.errorf("%U is case-folded differently by JavaScript without the u flag; add the u flag", c)
		}
	}
	return nil
}

// lazy copies a quantifier's lazy marker.
func (t *translator) lazy() {
	if t.more() && t.peek() == '?' {
		t.next()
		t.out.WriteByte('?')
	}
}

// group handles what follows '('.
func (t *translator) group() error {
	if !t.more() || t.peek() != '?' {
		t.out.WriteByte('(')
		return nil
	}
	switch {
	case t.at("?:"):
		t.pos += 2
		t.out.WriteString("(?:")
		return nil
	case t.at("?="), t.at("?!"), t.at("?<="), t.at("?<!"):
		return t.errorf("lookaround assertions are not supported by Go's regexp")
	case t.at("?<"):
		t.pos += 2
		start := t.pos
		for t.more() && t.peek() != '>' {
			t.next()
		}
		if !t.more() {
			return t.errorf("unterminated group name")
		}
		name := string(t.src[start:t.pos])
		t.next()
		if !validGroupName(name) {
			return t.errorf("group name %q is not an ASCII identifier", name)
		}
		if t.names == nil {
			t.names = map[string]bool{}
		}
		if t.names[name] {
			return t.errorf("duplicate group name %q", name)
		}
		t.names[name] = true
		t.out.WriteByte('(') // the name does not change whether it matches
		return nil
	}
	return t.errorf("unsupported group syntax '(?'")
}

func validGroupName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		ok := c == '_' || c == '$' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || (i > 0 && '0' <= c && c <= '9')
		if !ok {
			return false
		}
	}
	return true
}

// braces reads a quantifier {n}, {n,} or {n,m} after '{'. ok is false
// (and nothing is consumed) when the braces are not a quantifier.
func (t *translator) braces() (q string, ok bool, err error) {
	start := t.pos
	digits := func() (string, bool) {
		s := t.pos
		for t.more() && '0' <= t.peek() && t.peek() <= '9' {
			t.next()
		}
		return string(t.src[s:t.pos]), t.pos > s
	}
	lo, okLo := digits()
	hi, hasComma, okHi := "", false, false
	if okLo && t.more() && t.peek() == ',' {
		t.next()
		hasComma = true
		hi, okHi = digits()
	}
	if !okLo || !t.more() || t.peek() != '}' {
		t.pos = start
		return "", false, nil
	}
	t.next()
	n, errLo := strconv.Atoi(lo)
	if errLo != nil || n > 1000 {
		return "", false, t.errorf("repeat count above 1000 (Go's limit)")
	}
	if okHi {
		m, errHi := strconv.Atoi(hi)
		if errHi != nil || m > 1000 {
			return "", false, t.errorf("repeat count above 1000 (Go's limit)")
		}
		if m < n {
			return "", false, t.errorf("numbers out of order in {%d,%d} quantifier", n, m)
		}
		return fmt.Sprintf("{%d,%d}", n, m), true, nil
	}
	if hasComma {
		return fmt.Sprintf("{%d,}", n), true, nil
	}
	return fmt.Sprintf("{%d}", n), true, nil
}

// escape handles what follows '\' outside a class and reports whether the
// result may take a quantifier.
func (t *translator) escape() (bool, error) {
	if !t.more() {
		return false, t.errorf(`\ at end of pattern`)
	}
	c := t.peek()
	switch c {
	case 'b', 'B':
		t.next()
		t.out.WriteString(`\` + string(c))
		return false, nil
	case 'd', 'D', 'w', 'W':
		t.next()
		t.out.WriteString(`\` + string(c))
		return true, nil
	case 's':
		t.next()
		t.out.WriteString("[" + jsSpace + "]")
		return true, nil
	case 'S':
		t.next()
		t.out.WriteString("[" + jsNotSpace + "]")
		return true, nil
	case 'p', 'P':
		if t.unicode {
			t.next()
			cls, err := t.property(c == 'P')
			if err != nil {
				return false, err
			}
			t.out.WriteString("[" + cls + "]")
			return true, nil
		}
	}
	r, err := t.charEscape(false)
	if err != nil {
		return false, err
	}
	if r > 0xFFFF && !t.unicode {
		return false, t.errorf("escape for %U outside the BMP needs the u flag", r)
	}
	if err := t.checkFold(r, r); err != nil {
		return false, err
	}
	t.out.WriteString(regexp.QuoteMeta(string(r)))
	return true, nil
}

// charEscape reads an escape that stands for one character (after '\').
func (t *translator) charEscape(inClass bool) (rune, error) {
	c := t.next()
	switch c {
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'v':
		return '\v', nil
	case 'c':
		if t.more() && isASCIILetter(t.peek()) {
			return t.next() % 32, nil
		}
		return 0, t.errorf(`\c must be followed by an ASCII letter`)
	case '0':
		if t.more() && '0' <= t.peek() && t.peek() <= '9' {
			return 0, t.errorf("octal escapes are not supported")
		}
		return 0, nil
	case '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return 0, t.errorf("backreferences (and octal escapes) are not supported by Go's regexp")
	case 'k':
		if t.unicode || t.named {
			return 0, t.errorf("named backreferences are not supported by Go's regexp")
		}
	case 'x':
		if v, ok := t.hex(2); ok {
			return v, nil
		}
		return 0, t.errorf(`\x must be followed by two hex digits`)
	case 'u':
		return t.unicodeEscape()
	case '-':
		if inClass || !t.unicode {
			return '-', nil
		}
	}
	if strings.ContainsRune(`^$\.*+?()[]{}|/`, c) {
		return c, nil
	}
	if t.unicode {
		return 0, t.errorf(`invalid escape \%c with the u flag`, c)
	}
	if isASCIILetter(c) || ('0' <= c && c <= '9') {
		// \a, \e, \z, \A, \p ... are the plain letter in JavaScript without
		// the u flag, but escapes (or errors) in Go. Refuse the trap rather
		// than guess what was meant.
		return 0, t.errorf(`\%c is an identity escape in JavaScript (the letter itself); write %c`, c, c)
	}
	return c, nil
}

// unicodeEscape reads what follows \u.
func (t *translator) unicodeEscape() (rune, error) {
	if t.unicode && t.more() && t.peek() == '{' {
		t.next()
		start := t.pos
		for t.more() && t.peek() != '}' {
			t.next()
		}
		if !t.more() {
			return 0, t.errorf(`unterminated \u{...}`)
		}
		digits := string(t.src[start:t.pos])
		t.next()
		v, err := strconv.ParseUint(digits, 16, 32)
		if err != nil || len(digits) == 0 || len(digits) > 8 || v > unicode.MaxRune {
			return 0, t.errorf(`invalid \u{%s}`, digits)
		}
		if isSurrogate(rune(v)) {
			return 0, t.errorf("lone surrogate %U cannot match in a UTF-8 string", v)
		}
		return rune(v), nil
	}
	hi, ok := t.hex(4)
	if !ok {
		return 0, t.errorf(`\u must be followed by four hex digits`)
	}
	if !isSurrogate(hi) {
		return hi, nil
	}
	if hi <= 0xDBFF && t.at(`\u`) {
		save := t.pos
		t.pos += 2
		if lo, ok := t.hex(4); ok && 0xDC00 <= lo && lo <= 0xDFFF {
			return 0x10000 + (hi-0xD800)<<10 + (lo - 0xDC00), nil
		}
		t.pos = save
	}
	return 0, t.errorf("lone surrogate %U cannot match in a UTF-8 string", hi)
}

func (t *translator) hex(n int) (rune, bool) {
	if t.pos+n > len(t.src) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(t.src[t.pos:t.pos+n]), 16, 32)
	if err != nil {
		return 0, false
	}
	t.pos += n
	return rune(v), true
}

// property reads {Name} or {Key=Value} after \p or \P (u flag) and returns
// the contents of a Go character class. Only the properties with the same
// meaning in both engines are accepted: General_Category values (short
// names) and Script values.
func (t *translator) property(negated bool) (string, error) {
	if !t.more() || t.peek() != '{' {
		return "", t.errorf(`\p must be followed by {...} with the u flag`)
	}
	t.next()
	start := t.pos
	for t.more() && t.peek() != '}' {
		t.next()
	}
	if !t.more() {
		return "", t.errorf(`unterminated \p{...}`)
	}
	body := string(t.src[start:t.pos])
	t.next()
	key, value, hasKey := strings.Cut(body, "=")
	var name string
	switch {
	case !hasKey && unicode.Categories[body] != nil:
		name = body
	case hasKey && (key == "General_Category" || key == "gc") && unicode.Categories[value] != nil:
		name = value
	case hasKey && (key == "Script" || key == "sc") && unicode.Scripts[value] != nil:
		name = value
	default:
		return "", t.errorf(`unsupported Unicode property \p{%s}`, body)
	}
	if negated {
		return `\P{` + name + `}`, nil
	}
	return `\p{` + name + `}`, nil
}

// class translates a character class after '['. Every single character is
// written as \x{...}, so nothing in it can mean something else to Go (a
// POSIX [:name:], a leading ^, a stray - or ]).
func (t *translator) class() error {
	negated := false
	if t.more() && t.peek() == '^' {
		t.next()
		negated = true
	}
	if t.more() && t.peek() == ']' {
		t.next()
		if negated { // [^] matches any character
			t.out.WriteString(`[\x{0}-\x{10ffff}]`)
		} else { // [] matches nothing
			t.out.WriteString(`[^\x{0}-\x{10ffff}]`)
		}
		return nil
	}
	var b strings.Builder
	for {
		if !t.more() {
			return t.errorf("unterminated character class")
		}
		if t.peek() == ']' {
			t.next()
			break
		}
		lo, loSet, err := t.classAtom()
		if err != nil {
			return err
		}
		if t.more() && t.peek() == '-' && t.pos+1 < len(t.src) && t.src[t.pos+1] != ']' {
			t.next()
			hi, hiSet, err := t.classAtom()
			if err != nil {
				return err
			}
			if loSet != "" || hiSet != "" {
				if t.unicode {
					return t.errorf("a class escape cannot bound a range")
				}
				// Without the u flag the '-' is literal.
				for _, r := range []rune{lo, hi} {
					if err := t.checkFold(r, r); err != nil {
						return err
					}
				}
				b.WriteString(loSet + classChar(lo, loSet) + `\x{2d}` + hiSet + classChar(hi, hiSet))
				continue
			}
			if hi < lo {
				return t.errorf("range out of order in character class")
			}
			if err := t.checkFold(lo, hi); err != nil {
				return err
			}
			fmt.Fprintf(&b, `\x{%x}-\x{%x}`, lo, hi)
			continue
		}
		if loSet == "" {
			if err := t.checkFold(lo, lo); err != nil {
				return err
			}
		}
		b.WriteString(loSet + classChar(lo, loSet))
	}
	t.out.WriteByte('[')
	if negated {
		t.out.WriteByte('^')
	}
	t.out.WriteString(b.String())
	t.out.WriteByte(']')
	return nil
}

func classChar(r rune, set string) string {
	if set != "" {
		return ""
	}
	return fmt.Sprintf(`\x{%x}`, r)
}

// classAtom reads one class member: a character, or (set != "") a class
// escape written as the contents of a Go class.
func (t *translator) classAtom() (r rune, set string, err error) {
	c := t.next()
	if c != '\\' {
		if c > 0xFFFF && !t.unicode {
			return 0, "", t.errorf("%U in a class is two code units without the u flag; add the u flag", c)
		}
		return c, "", nil
	}
	if !t.more() {
		return 0, "", t.errorf(`\ at end of pattern`)
	}
	switch e := t.peek(); e {
	case 'd', 'D', 'w', 'W':
		t.next()
		return 0, `\` + string(e), nil
	case 's':
		t.next()
		return 0, jsSpace, nil
	case 'S':
		t.next()
		return 0, jsNotSpace, nil
	case 'b':
		t.next()
		return '\b', "", nil
	case 'p', 'P':
		if t.unicode {
			t.next()
			cls, err := t.property(e == 'P')
			return 0, cls, err
		}
	}
	r, err = t.charEscape(true)
	if err == nil && r > 0xFFFF && !t.unicode {
		err = t.errorf("escape for %U outside the BMP needs the u flag", r)
	}
	return r, "", err
}

func isASCIILetter(c rune) bool { return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') }
func isSurrogate(c rune) bool   { return 0xD800 <= c && c <= 0xDFFF }
