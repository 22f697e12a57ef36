package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// JSON pointers (RFC 6901) name the argument a resource comes from.

// parsePointer splits a pointer into its unescaped reference tokens. The
// empty pointer (the whole document) is refused: arguments are an object,
// never a resource string.
func parsePointer(s string) ([]string, error) {
	switch {
	case s == "":
		return nil, errors.New(`the empty JSON pointer names all the arguments; name one, e.g. /path`)
	case len(s) > MaxPointerLen:
		return nil, fmt.Errorf("JSON pointer longer than %d bytes", MaxPointerLen)
	case s[0] != '/':
		return nil, fmt.Errorf("JSON pointer %q must start with '/', e.g. /%s", s, s)
	}
	raw := strings.Split(s[1:], "/")
	if len(raw) > MaxPointerTokens {
		return nil, fmt.Errorf("JSON pointer %q has more than %d parts", s, MaxPointerTokens)
	}
	tokens := make([]string, len(raw))
	for i, t := range raw {
		u, err := unescapeToken(t)
		if err != nil {
			return nil, fmt.Errorf("JSON pointer %q: %v", s, err)
		}
		tokens[i] = u
	}
	return tokens, nil
}

// unescapeToken undoes ~1 ('/') and ~0 ('~'); any other '~' is an error.
func unescapeToken(t string) (string, error) {
	if !strings.Contains(t, "~") {
		return t, nil
	}
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		if t[i] != '~' {
			b.WriteByte(t[i])
			continue
		}
		if i+1 == len(t) || t[i+1] != '0' && t[i+1] != '1' {
			return "", errors.New(`'~' must be followed by 0 ('~') or 1 ('/')`)
		}
		if t[i+1] == '0' {
			b.WriteByte('~')
		} else {
			b.WriteByte('/')
		}
		i++
	}
	return b.String(), nil
}

// escapeToken is unescapeToken's inverse.
func escapeToken(t string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(t)
}

// formatPointer writes tokens as a pointer.
func formatPointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteString("/" + escapeToken(t))
	}
	return b.String()
}

// errMissing says the pointer names nothing in the document.
var errMissing = errors.New("missing")

// lookupString finds the string that tokens point at in doc, which must be
// one valid JSON value. It refuses a member name given twice on the way:
// readers disagree on which one counts, and the gate must check the value
// the upstream will use.
func lookupString(doc json.RawMessage, tokens []string) (string, error) {
	cur := bytes.TrimSpace(doc)
	switch {
	case len(cur) == 0 || string(cur) == "null":
		return "", errors.New("the call has no arguments")
	case cur[0] != '{':
		return "", errors.New("the arguments are not a JSON object")
	case !json.Valid(cur):
		// Checked once, so that the walk below can skip values by their
		// brackets and quotes alone.
		return "", errors.New("the arguments are not valid JSON")
	}
	for i, t := range tokens {
		var err error
		switch cur[0] {
		case '{':
			cur, err = member(cur, t)
		case '[':
			cur, err = element(cur, t)
		default:
			return "", fmt.Errorf("%s is %s, not an object or array", describeAt(tokens[:i]), kind(cur))
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", formatPointer(tokens[:i+1]), err)
		}
	}
	if cur[0] != '"' {
		return "", fmt.Errorf("%s is %s, not a string", formatPointer(tokens), kind(cur))
	}
	if !utf8.Valid(cur) {
		return "", fmt.Errorf("%s is not valid UTF-8", formatPointer(tokens))
	}
	var s string
	if err := json.Unmarshal(cur, &s); err != nil {
		return "", fmt.Errorf("%s: %v", formatPointer(tokens), err)
	}
	// encoding/json decodes an unpaired surrogate escape to U+FFFD; another
	// reader may not, so such a resource has no single meaning.
	if strings.ContainsRune(s, utf8.RuneError) {
		return "", fmt.Errorf("%s contains U+FFFD or an unpaired surrogate", formatPointer(tokens))
	}
	return s, nil
}

func describeAt(tokens []string) string {
	if len(tokens) == 0 {
		return "the arguments"
	}
	return formatPointer(tokens)
}

func kind(v []byte) string {
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// The walk below reads JSON that json.Valid has accepted, so it need not
// check syntax: it only finds where each name and value begins and ends.

// member returns the value of the member named name in a JSON object.
func member(obj []byte, name string) ([]byte, error) {
	var found []byte
	i := skipSpace(obj, 1)
	for i < len(obj) && obj[i] != '}' {
		end := skipString(obj, i)
		key := obj[i:end]
		i = skipSpace(obj, end)
		i = skipSpace(obj, i+1) // ':'
		vend := skipValue(obj, i)
		if memberName(key) == name {
			if found != nil {
				return nil, errors.New("given twice")
			}
			found = obj[i:vend]
		}
		i = skipSpace(obj, vend)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	if found == nil {
		return nil, errMissing
	}
	return found, nil
}

// memberName decodes a quoted member name, escapes included, so that
// "p\u0061th" is the same name as "path".
func memberName(quoted []byte) string {
	if bytes.IndexByte(quoted, '\\') < 0 {
		return string(quoted[1 : len(quoted)-1])
	}
	var s string
	_ = json.Unmarshal(quoted, &s) // valid: json.Valid accepted the document
	return s
}

// element returns the element of a JSON array at the index token names.
func element(arr []byte, token string) ([]byte, error) {
	if token == "-" {
		return nil, errors.New(`"-" names no element`)
	}
	if token == "" || token != "0" && token[0] == '0' || strings.Trim(token, "0123456789") != "" {
		return nil, errors.New("not an array index")
	}
	idx, err := strconv.Atoi(token)
	if err != nil {
		return nil, errMissing // larger than any array
	}
	i := skipSpace(arr, 1)
	for n := 0; i < len(arr) && arr[i] != ']'; n++ {
		end := skipValue(arr, i)
		if n == idx {
			return arr[i:end], nil
		}
		i = skipSpace(arr, end)
		if i < len(arr) && arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
	return nil, errMissing
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at b[i] ('"').
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the value that starts at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for ; i < len(b); i++ { // a number, true, false or null
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
	}
	return i
}
