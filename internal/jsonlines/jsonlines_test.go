package jsonlines

import (
	"errors"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	var got []string
	collect := func(l []byte) error { got = append(got, string(l)); return nil }
	n, err := Read([]byte("a\nbb\ntorn"), collect)
	if err != nil || n != 5 || strings.Join(got, ",") != "a,bb" {
		t.Fatalf("Read = %d, %v, lines %q", n, err, got)
	}
	for _, tt := range []struct{ data, want string }{
		{"a\n\nb\n", "line 2: empty line"},
		{"a\n0123456789a\n", "line 2: 11 bytes, over the limit of 10"},
		{"a\nbad\n", "line 2: refused"},
	} {
		n, err := Read([]byte(tt.data), func(l []byte) error {
			if string(l) == "bad" {
				return errors.New("refused")
			}
			return Check(l, 10)
		})
		if err == nil || err.Error() != tt.want || n != 2 {
			t.Errorf("Read(%q) = %d, %v; want 2, %q", tt.data, n, err, tt.want)
		}
	}
}
