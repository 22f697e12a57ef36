package receipt

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/timestamp"
)

// appendTime writes exactly what timestamp.Format does, quoted, for times
// in any zone, before 1970, at second and millisecond edges, in years
// outside 0000-9999 (not cached), and in the same second after another
// (cached), in random order (a fixed seed: the same times every run).
func TestAppendTimeIsFormat(t *testing.T) {
	zones := []*time.Location{time.UTC, time.FixedZone("east", 5*3600+1800), time.FixedZone("west", -11*3600)}
	edges := []time.Time{
		{}, time.Unix(0, 0), time.Unix(-1, 999_999_999), time.Unix(-1, 0), time.Unix(0, 999_999),
		time.Unix(0, 1_000_000), time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 500_000_000, time.UTC), time.Date(999, 6, 1, 0, 0, 0, 0, time.UTC),
		time.Now(), time.Now().Round(0),
	}
	check := func(tm time.Time) {
		t.Helper()
		if got, want := string(appendTime(nil, tm)), `"`+timestamp.Format(tm)+`"`; got != want {
			t.Fatalf("%v: %s, want %s", tm, got, want)
		}
	}
	r := rand.New(rand.NewPCG(20, 3))
	for range 200000 {
		var tm time.Time
		switch r.IntN(4) {
		case 0:
			tm = edges[r.IntN(len(edges))]
		case 1:
			tm = time.Unix(r.Int64N(1<<36)-(1<<35), r.Int64N(1e9)) // ± 1,000 years around 1970
		case 2:
			tm = time.Unix(1_800_000_000+r.Int64N(3), r.Int64N(1e9)) // the same few seconds
		default:
			tm = time.Date(r.IntN(12000)-1000, time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1e9), time.UTC)
		}
		check(tm.In(zones[r.IntN(len(zones))]))
	}
}

func BenchmarkAppendTime(b *testing.B) {
	tm := time.Now()
	var buf []byte
	for b.Loop() {
		buf = appendTime(buf[:0], tm)
	}
}
