package policy

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParsePointer(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  string
	}{
		{"/path", []string{"path"}, ""},
		{"/a/b/0", []string{"a", "b", "0"}, ""},
		{"/", []string{""}, ""},
		{"//", []string{"", ""}, ""},
		{"/a~1b", []string{"a/b"}, ""},
		{"/m~0n", []string{"m~n"}, ""},
		{"/~01", []string{"~1"}, ""}, // ~0 first: "~01" is "~" then "1", not "/"
		{"/~10", []string{"/0"}, ""},
		{"/c%d/e^f/g|h/i\\j/k\"l/ /", []string{"c%d", "e^f", "g|h", "i\\j", "k\"l", " ", ""}, ""},
		{"", nil, "the empty JSON pointer"},
		{"path", nil, "must start with '/'"},
		{"#/path", nil, "must start with '/'"},
		{"/a~", nil, "'~' must be followed by 0"},
		{"/a~2", nil, "'~' must be followed by 0"},
		{"/" + strings.Repeat("a", MaxPointerLen), nil, "longer than"},
		{strings.Repeat("/a", MaxPointerTokens), make32("a"), ""},
		{strings.Repeat("/a", MaxPointerTokens+1), nil, "more than 32 parts"},
	}
	for _, tt := range tests {
		got, err := parsePointer(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parsePointer(%q) = %q, %v; want error %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parsePointer(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
		if back := formatPointer(got); back != tt.in {
			t.Errorf("formatPointer(%q) = %q, want %q", got, back, tt.in)
		}
	}
}

func make32(s string) []string {
	out := make([]string, MaxPointerTokens)
	for i := range out {
		out[i] = s
	}
	return out
}

// The examples of RFC 6901 §5, with string values.
func TestLookupRFC6901(t *testing.T) {
	doc := json.RawMessage(`{
      "foo": ["bar", "baz"],
      "": "0",
      "a/b": "1",
      "c%d": "2",
      "e^f": "3",
      "g|h": "4",
      "i\\j": "5",
      "k\"l": "6",
      " ": "7",
      "m~n": "8"
   }`)
	for ptr, want := range map[string]string{
		"/foo/0": "bar", "/foo/1": "baz", "/": "0", "/a~1b": "1", "/c%d": "2", "/e^f": "3",
		"/g|h": "4", "/i\\j": "5", "/k\"l": "6", "/ ": "7", "/m~0n": "8",
	} {
		tokens, err := parsePointer(ptr)
		if err != nil {
			t.Fatal(err)
		}
		got, err := lookupString(doc, tokens)
		if err != nil || got != want {
			t.Errorf("lookup %s = %q, %v; want %q", ptr, got, err, want)
		}
	}
}

// referenceLookup walks a document decoded by encoding/json.
func referenceLookup(doc []byte, tokens []string) (string, bool) {
	var v any
	if json.Unmarshal(doc, &v) != nil {
		return "", false
	}
	for _, t := range tokens {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[t]; !ok {
				return "", false
			}
		case []any:
			i := 0
			if t == "" || len(t) > 1 && t[0] == '0' || len(t) > 9 {
				return "", false
			}
			for _, c := range t {
				if c < '0' || c > '9' {
					return "", false
				}
				i = i*10 + int(c-'0')
			}
			if i >= len(x) {
				return "", false
			}
			v = x[i]
		default:
			return "", false
		}
	}
	s, ok := v.(string)
	return s, ok
}

func FuzzPointer(f *testing.F) {
	f.Add("/path", []byte(`{"path": "/a"}`))
	f.Add("/a~1b/0", []byte(`{"a/b": ["x", "y"]}`))
	f.Add("/m~0n/", []byte(`{"m~n": {"": "deep"}}`))
	f.Add("/l/01", []byte(`{"l": ["a", "b"]}`))
	f.Add("/p", []byte(`{"p": "a", "p": "b"}`))
	f.Add("/p", []byte(`{"p": "\ud800"}`))
	f.Add("/p/-", []byte(`{"p": []}`))
	f.Add("~", []byte(`[]`))
	f.Fuzz(func(t *testing.T, ptr string, doc []byte) {
		tokens, err := parsePointer(ptr)
		if err != nil {
			return
		}
		if back := formatPointer(tokens); back != ptr {
			t.Fatalf("round trip %q -> %q -> %q", ptr, tokens, back)
		}
		got, err := lookupString(doc, tokens)
		if err != nil || !json.Valid(doc) {
			return
		}
		// What the gate reads is what encoding/json (which takes the last of
		// duplicate names, refused on the path here) reads.
		want, ok := referenceLookup(doc, tokens)
		if !ok || want != got {
			t.Fatalf("lookup %q in %s = %q; reference %q, %v", ptr, doc, got, want, ok)
		}
		if bytes.ContainsRune([]byte(got), '\uFFFD') {
			t.Fatalf("lookup returned U+FFFD: %q", got)
		}
	})
}
