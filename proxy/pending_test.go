package proxy

import (
	"math/rand/v2"
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

// intIndex answers as the map it stands for: random sets, gets and
// deletes of keys that collide in their slots (and keys far apart with
// the same low bits, and negative ones) are checked against a map after
// every step. Set of a present key replaces it, delete of an absent one
// does nothing, and each visits every value once.
func TestIntIndexIsMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 9))
	vals := make([]*pending, 64)
	for i := range vals {
		vals[i] = new(pending)
	}
	for round := 0; round < 20; round++ {
		var x intIndex
		ref := map[int64]*pending{}
		key := func() int64 {
			switch rng.IntN(4) {
			case 0:
				return int64(rng.IntN(3 * intIndexSlots)) // sequential numbers, wrapping
			case 1:
				return int64(rng.IntN(8)) * intIndexSlots // the same slot
			case 2:
				return -int64(rng.IntN(2 * intIndexSlots))
			}
			return rng.Int64N(maxSafeInt) - maxSafeInt/2
		}
		for step := 0; step < 20000; step++ {
			k := key()
			switch rng.IntN(3) {
			case 0:
				p := vals[rng.IntN(len(vals))]
				x.set(k, p)
				ref[k] = p
			case 1:
				x.del(k)
				delete(ref, k)
			}
			if got := x.get(k); got != ref[k] {
				t.Fatalf("round %d step %d: get(%d) = %p, want %p", round, step, k, got, ref[k])
			}
			if x.len() != len(ref) {
				t.Fatalf("round %d step %d: len %d, want %d", round, step, x.len(), len(ref))
			}
		}
		for k, p := range ref {
			if x.get(k) != p {
				t.Fatalf("round %d: get(%d) = %p, want %p", round, k, x.get(k), p)
			}
		}
		seen := map[*pending]int{}
		x.each(func(p *pending) { seen[p]++ })
		want := map[*pending]int{}
		for _, p := range ref {
			want[p]++
		}
		if len(seen) != len(want) {
			t.Fatalf("round %d: each saw %d values, want %d", round, len(seen), len(want))
		}
		for p, n := range want {
			if seen[p] != n {
				t.Fatalf("round %d: each saw a value %d times, want %d", round, seen[p], n)
			}
		}
		x.clear()
		if x.len() != 0 || x.get(0) != nil || x.get(intIndexSlots) != nil {
			t.Fatal("clear left something")
		}
	}
}

// More requests in flight than the index has slots, answered out of
// order, leave the table empty, and each is found until it is removed.
func TestPendingTableManyInFlight(t *testing.T) {
	tab := newPendingTable()
	const n = 3*intIndexSlots + 7
	ps := make([]*pending, n)
	for i := range ps {
		// Client ids collide in slots with the forwarded numbers' and
		// with each other's (every id is a multiple of 3).
		ps[i] = newPending(requestID{num: int64(3 * i)}, []byte(strconv.Itoa(3*i)), "tools/call")
		ps[i].up = int64(i + 1)
		tab.put(ps[i])
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(n, func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
	for i, p := range ps {
		if tab.answered([]byte(strconv.FormatInt(p.up, 10))) != p || tab.get(p.key) != p {
			t.Fatalf("request %d (up %d) not found", i, p.up)
		}
		tab.remove(p)
		if tab.answered([]byte(strconv.FormatInt(p.up, 10))) != nil || tab.get(p.key) != nil || tab.len() != n-i-1 {
			t.Fatalf("request %d (up %d) still found after its removal, or len %d", i, p.up, tab.len())
		}
	}
}

// BenchmarkPendingTable is the table's work for one pipelined call with 64
// in flight: the duplicate check, put, the answer's lookup and remove.
func BenchmarkPendingTable(b *testing.B) {
	tab := newPendingTable()
	const inFlight = 64
	ring := make([]*pending, inFlight)
	raw := make([][]byte, 0, 1024)
	for i := 0; i < 1024; i++ {
		raw = append(raw, []byte(strconv.Itoa(i)))
	}
	for i := range ring {
		ring[i] = newPending(requestID{num: int64(i)}, raw[i], "tools/call")
		ring[i].up = int64(i + 1)
		tab.put(ring[i])
	}
	b.ReportAllocs()
	for i := inFlight; b.Loop(); i++ {
		old := ring[i%inFlight]
		if tab.answered(raw[old.up%1024]) == nil && old.up < 1024 {
			b.Fatal("not found")
		}
		tab.remove(old)
		k := requestID{num: int64(i)}
		if tab.get(k) != nil {
			b.Fatal("duplicate")
		}
		old.key, old.up = k, int64(i+1)
		tab.put(old)
	}
}
