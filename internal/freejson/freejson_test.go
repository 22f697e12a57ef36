package freejson

import (
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		`{ "b": 1E3, "a": [0.1, -0, true] }`: `{"a":[0.1,0,true],"b":1000}`,
		`"\u00e9"`:                           `"é"`,
		`9007199254740991`:                   `9007199254740991`,
	} {
		got, err := Canonical([]byte(in), 4)
		if err != nil || string(got) != want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		`{"a":1,"a":2}`:    "duplicate",
		`9007199254740992`: "outside ±(2^53-1)",
		`1e20`:             "outside ±(2^53-1)",
		`1e400`:            "out of the range of a double",
		`[[[[[1]]]]]`:      "nested deeper than 4 levels",
		`{"a":1} {"b":2}`:  "",
		"\"\xff\"":         "",
	} {
		if _, err := Canonical([]byte(in), 4); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Canonical(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}
