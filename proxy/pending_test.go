package proxy

import (
	"strconv"
	"strings"
	"testing"
)

func TestParseRequestID(t *testing.T) {
	long := `"` + strings.Repeat("a", 256) + `"`
	for _, tt := range []struct {
		raw string
		ok  bool
	}{
		{`0`, true}, {`7`, true}, {`-7`, true}, {`9007199254740991`, true}, {`-9007199254740991`, true},
		{`"a"`, true}, {`""`, true}, {`"a\u0062"`, true}, {`"` + strings.Repeat("a", 256) + `"`, true},
		{`9007199254740992`, false}, {`-9007199254740992`, false}, {`12345678901234567`, false},
		{`1.0`, false}, {`1e0`, false}, {`01`, false}, {`-0`, false}, {`-`, false}, {`+1`, false},
		{``, false}, {`null`, false}, {`true`, false}, {`{}`, false}, {`[]`, false},
		{long[:len(long)-1] + `x"`, false}, {`"\x"`, false},
	} {
		if _, ok := parseRequestID([]byte(tt.raw)); ok != tt.ok {
			t.Errorf("parseRequestID(%.40q) ok = %v, want %v", tt.raw, ok, tt.ok)
		}
	}
}

// A response finds its request by the id's value for strings and by its
// text for numbers, and nothing else finds it.
func TestPendingLookup(t *testing.T) {
	tab := newPendingTable()
	add := func(raw string) *pending {
		key, ok := parseRequestID([]byte(raw))
		if !ok {
			t.Fatalf("parseRequestID(%s) refused", raw)
		}
		p := newPending(key, []byte(raw), "m")
		p.up = int64(tab.len() + 1)
		tab.put(p)
		return p
	}
	str, num, neg := add(`"ab"`), add(`1`), add(`-5`)
	for _, tt := range []struct {
		raw  string
		want *pending
	}{
		{`"ab"`, str}, {`"a\u0062"`, str}, {`"\u0061\u0062"`, str},
		{`1`, num}, {`-5`, neg},
		{`"1"`, nil}, {`1.0`, nil}, {`1e0`, nil}, {`01`, nil}, {`-05`, nil}, {`"AB"`, nil},
		{`null`, nil}, {``, nil}, {`[1]`, nil}, {`"`, nil},
	} {
		if got := tab.lookup([]byte(tt.raw)); got != tt.want {
			t.Errorf("lookup(%s) = %p, want %p", tt.raw, got, tt.want)
		}
	}
	if tab.len() != 3 {
		t.Fatalf("len = %d, want 3", tab.len())
	}
	tab.remove(num)
	if tab.lookup([]byte(`1`)) != nil || tab.len() != 2 {
		t.Fatal("a removed request is still found")
	}
	if ps := tab.drain(); len(ps) != 2 || tab.len() != 0 || tab.lookup([]byte(`"ab"`)) != nil {
		t.Fatalf("drain returned %d and left %d", len(ps), tab.len())
	}
}

func TestCanonicalInt(t *testing.T) {
	for _, n := range []int64{0, 1, -1, 42, maxSafeInt, -maxSafeInt, 1234567890123456} {
		raw := strconv.FormatInt(n, 10)
		if got, ok := canonicalInt([]byte(raw)); !ok || got != n {
			t.Errorf("canonicalInt(%s) = %d, %v", raw, got, ok)
		}
	}
}

// A request is found by the client's id and by the id it was forwarded
// with, and leaves both when removed: a late answer finds nothing.
func TestPendingUpstreamID(t *testing.T) {
	tab := newPendingTable()
	p := newPending(requestID{num: 7}, []byte("7"), "tools/call")
	p.up = 1
	tab.put(p)
	if tab.lookup([]byte("7")) != p || tab.answered([]byte("1")) != p || tab.answered([]byte("7")) != nil || tab.answered([]byte(`"1"`)) != nil {
		t.Fatal("lookup by the client's id or answered by the upstream's id is wrong")
	}
	tab.remove(p)
	if tab.len() != 0 || tab.lookup([]byte("7")) != nil || tab.answered([]byte("1")) != nil {
		t.Fatal("a removed request is still found")
	}
}

// A long id does not fit the inline buffer but is still kept exactly.
func TestPendingLongID(t *testing.T) {
	for _, raw := range []string{`1`, `"` + strings.Repeat("b", 40) + `"`} {
		p := newPending(requestID{}, []byte(raw), "m")
		if string(p.id) != raw {
			t.Errorf("id %q kept as %q", raw, p.id)
		}
	}
}
