package budget

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// reserveAll runs one Reserve per goroutine, all released at once, and
// returns the reservations that succeeded. Every failure must be
// ErrExceeded.
func reserveAll(t *testing.T, s Store, goroutines int, levels func(i int) []Level, cost int64) []*Reservation {
	t.Helper()
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		mu    sync.Mutex
		won   []*Reservation
	)
	for i := range goroutines {
		wg.Go(func() {
			<-start
			r, err := s.Reserve(levels(i), cost)
			if err != nil {
				if !errors.Is(err, ErrExceeded) {
					t.Errorf("goroutine %d: %v", i, err)
				}
				return
			}
			mu.Lock()
			won = append(won, r)
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return won
}

// A budget that allows exactly 40 calls, raced by many more goroutines:
// exactly 40 win, whichever level binds.
func TestConcurrentReserveExactly40(t *testing.T) {
	const cost, calls, goroutines = 25, 40, 150
	tests := []struct {
		name   string
		levels func(i int) []Level
		want   map[string]int64
	}{
		{"one level", func(int) []Level { return []Level{{"root", calls * cost}} }, map[string]int64{"root": calls * cost}},
		{"parent binds", func(i int) []Level {
			// Four children, each with room for 100 calls; the parent has room for 40.
			return []Level{{"root", calls * cost}, {fmt.Sprint("root/", i%4), 100 * cost}}
		}, map[string]int64{"root": calls * cost}},
		{"child binds", func(int) []Level {
			return []Level{{"root", 1000 * cost}, {"root/a", calls * cost}}
		}, map[string]int64{"root": calls * cost, "root/a": calls * cost}},
		{"parent binds with a limit that is not a multiple", func(i int) []Level {
			return []Level{{"root", calls*cost + cost - 1}, {fmt.Sprint("root/", i%7), 100 * cost}}
		}, map[string]int64{"root": calls * cost}},
	}
	forEachStore(t, func(t *testing.T, k storeKind) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := k.open(t)
				won := reserveAll(t, s, goroutines, tt.levels, cost)
				if len(won) != calls {
					t.Fatalf("%d reservations succeeded, want %d", len(won), calls)
				}
				wantSpent(t, s, tt.want)
				if tt.name == "parent binds" {
					var children int64
					for c := range 4 {
						children += s.Spent(fmt.Sprint("root/", c))
					}
					if children != calls*cost {
						t.Errorf("children spent %d in all, want %d", children, calls*cost)
					}
				}
				for _, r := range won {
					if err := s.Commit(r, cost); err != nil {
						t.Fatal(err)
					}
				}
				wantSpent(t, k.reopen(t, s), tt.want)
			})
		}
	})
}

// Reservations, commits (lower, equal, higher), releases and reads race;
// the spend is always the sum of what was committed, and no moment lets
// the committed plus held spend pass the limit while every commit is
// within its reservation.
func TestConcurrentLifecycle(t *testing.T) {
	const limit, goroutines, rounds = 5000, 64, 30
	forEachStore(t, func(t *testing.T, k storeKind) {
		s := k.open(t)
		levels := func(g int) []Level {
			return []Level{{"root", limit}, {fmt.Sprint("root/", g%3), limit}}
		}
		var committed [3]atomic.Int64
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for i := range rounds {
					cost := int64(1 + (g+i)%20)
					r, err := s.Reserve(levels(g), cost)
					if err != nil {
						if !errors.Is(err, ErrExceeded) {
							t.Error(err)
						}
						continue
					}
					if got := s.Spent("root"); got > limit {
						t.Errorf("spent %d over the limit %d while commits are within their reservations", got, limit)
					}
					switch i % 3 {
					case 0:
						err = s.Release(r)
					case 1:
						err = s.Commit(r, cost)
						committed[g%3].Add(cost)
					case 2:
						err = s.Commit(r, cost/2)
						committed[g%3].Add(cost / 2)
					}
					if err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		want := map[string]int64{"root": 0}
		for c := range committed {
			want[fmt.Sprint("root/", c)] = committed[c].Load()
			want["root"] += committed[c].Load()
		}
		wantSpent(t, s, want)
		wantSpent(t, k.reopen(t, s), want)
	})
}
