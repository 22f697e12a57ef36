package budget

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestReserve(t *testing.T) {
	const root, child, other = "ISSUER/del_root", "ISSUER/del_root/del_a", "ISSUER/del_root/del_b"
	tests := []struct {
		name   string
		spent  map[string]int64 // committed before the reservation
		levels []Level
		cost   int64
		want   *ExceededError // nil: the reservation succeeds
	}{
		{"fits exactly", nil, []Level{{root, 100}}, 100, nil},
		{"one over", nil, []Level{{root, 100}}, 101, &ExceededError{root, 100, 0, 101}},
		{"fits after spend", map[string]int64{root: 60}, []Level{{root, 100}}, 40, nil},
		{"over after spend", map[string]int64{root: 60}, []Level{{root, 100}}, 41, &ExceededError{root, 100, 60, 41}},
		{"free call with room", map[string]int64{root: 99}, []Level{{root, 100}}, 0, nil},
		{"free call at the limit", map[string]int64{root: 100}, []Level{{root, 100}}, 0, &ExceededError{root, 100, 100, 0}},
		{"free call past the limit", map[string]int64{root: 150}, []Level{{root, 100}}, 0, &ExceededError{root, 100, 150, 0}},
		{"zero limit refuses a free call", nil, []Level{{root, 0}}, 0, &ExceededError{root, 0, 0, 0}},
		{"huge cost", nil, []Level{{root, math.MaxInt64}}, math.MaxInt64, nil},
		{"huge cost over spend", map[string]int64{root: 1}, []Level{{root, math.MaxInt64}}, math.MaxInt64, &ExceededError{root, math.MaxInt64, 1, math.MaxInt64}},
		{"two levels fit", nil, []Level{{root, 100}, {child, 50}}, 50, nil},
		{"parent binds", map[string]int64{root: 90}, []Level{{root, 100}, {child, 50}}, 20, &ExceededError{root, 100, 90, 20}},
		{"child binds", nil, []Level{{root, 100}, {child, 50}}, 60, &ExceededError{child, 50, 0, 60}},
		{"sibling spend counts at the parent", map[string]int64{root: 80, other: 80}, []Level{{root, 100}, {child, 50}}, 30, &ExceededError{root, 100, 80, 30}},
		{"both refuse: root is named", map[string]int64{root: 100, child: 50}, []Level{{root, 100}, {child, 50}}, 1, &ExceededError{root, 100, 100, 1}},
		{"duplicate key counts once", nil, []Level{{root, 100}, {root, 100}}, 100, nil},
		{"duplicate key: the lower limit binds", nil, []Level{{root, 100}, {root, 50}}, 60, &ExceededError{root, 50, 0, 60}},
	}
	forEachStore(t, func(t *testing.T, k storeKind) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := k.open(t)
				for key, v := range tt.spent {
					spend(t, s, v, key)
				}
				r, err := s.Reserve(tt.levels, tt.cost)
				want := map[string]int64{root: tt.spent[root], child: tt.spent[child], other: tt.spent[other]}
				if tt.want == nil {
					if err != nil {
						t.Fatalf("Reserve: %v", err)
					}
					if r.Cost() != tt.cost {
						t.Errorf("Cost() = %d, want %d", r.Cost(), tt.cost)
					}
					for _, l := range tt.levels {
						want[l.Key] = tt.spent[l.Key] + tt.cost
					}
				} else {
					var e *ExceededError
					if !errors.As(err, &e) || !errors.Is(err, ErrExceeded) {
						t.Fatalf("Reserve: %v, want an *ExceededError", err)
					}
					if *e != *tt.want {
						t.Errorf("got %+v, want %+v", *e, *tt.want)
					}
					if r != nil {
						t.Error("a refused Reserve returned a reservation")
					}
				}
				wantSpent(t, s, want)
				wantSpent(t, k.reopen(t, s), want)
			})
		}
	})
}

func TestReserveRefusesArguments(t *testing.T) {
	many := make([]Level, MaxLevels+1)
	for i := range many {
		many[i] = Level{Key: strings.Repeat("k", i+1), Limit: 10}
	}
	tests := []struct {
		name   string
		levels []Level
		cost   int64
		want   string
	}{
		{"negative cost", []Level{{"a", 10}}, -1, "negative cost -1"},
		{"negative limit", []Level{{"a", 10}, {"b", -5}}, 1, `negative limit -5 for "b"`},
		{"no levels", nil, 1, "at least one level"},
		{"empty key", []Level{{"", 10}}, 1, "empty key"},
		{"invalid UTF-8", []Level{{"a\xffb", 10}}, 1, "not valid UTF-8"},
		{"long key", []Level{{strings.Repeat("k", MaxKeyLen+1), 10}}, 1, "over the limit of 8192"},
		{"too many levels", many, 1, "65 levels, over the limit of 64"},
	}
	forEachStore(t, func(t *testing.T, k storeKind) {
		s := k.open(t)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r, err := s.Reserve(tt.levels, tt.cost)
				if err == nil || r != nil {
					t.Fatalf("Reserve succeeded")
				}
				if errors.Is(err, ErrExceeded) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error %q, want one containing %q and not ErrExceeded", err, tt.want)
				}
			})
		}
		wantSpent(t, s, map[string]int64{"a": 0, "b": 0})
	})
}

// TestLifecycle runs sequences of reserve, commit and release and checks
// the spend after each; a restart (File) must find the same spend.
func TestLifecycle(t *testing.T) {
	lv := []Level{{"root", 100}, {"root/a", 60}}
	type want = map[string]int64
	tests := []struct {
		name string
		run  func(t *testing.T, s Store) want
	}{
		{"held cost counts", func(t *testing.T, s Store) want {
			mustReserve(t, s, lv, 30)
			return want{"root": 30, "root/a": 30}
		}},
		{"held cost refuses others", func(t *testing.T, s Store) want {
			mustReserve(t, s, lv, 40)
			if _, err := s.Reserve(lv, 21); !isExceeded(err) {
				t.Errorf("second Reserve: %v, want ErrExceeded", err)
			}
			mustReserve(t, s, lv, 20)
			return want{"root": 60, "root/a": 60}
		}},
		{"commit lower", func(t *testing.T, s Store) want {
			r := mustReserve(t, s, lv, 50)
			if err := s.Commit(r, 20); err != nil {
				t.Fatal(err)
			}
			return want{"root": 20, "root/a": 20}
		}},
		{"commit equal", func(t *testing.T, s Store) want {
			r := mustReserve(t, s, lv, 50)
			if err := s.Commit(r, 50); err != nil {
				t.Fatal(err)
			}
			return want{"root": 50, "root/a": 50}
		}},
		{"commit higher, past the limit", func(t *testing.T, s Store) want {
			r := mustReserve(t, s, lv, 50)
			if err := s.Commit(r, 75); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Reserve(lv, 0); !isExceeded(err) {
				t.Errorf("Reserve after overspend: %v, want ErrExceeded", err)
			}
			return want{"root": 75, "root/a": 75}
		}},
		{"commit zero", func(t *testing.T, s Store) want {
			r := mustReserve(t, s, lv, 50)
			if err := s.Commit(r, 0); err != nil {
				t.Fatal(err)
			}
			return want{"root": 0, "root/a": 0}
		}},
		{"free reservation committed with a cost", func(t *testing.T, s Store) want {
			r := mustReserve(t, s, lv, 0)
			if err := s.Commit(r, 7); err != nil {
				t.Fatal(err)
			}
			return want{"root": 7, "root/a": 7}
		}},
		{"release", func(t *testing.T, s Store) want {
			r := mustReserve(t, s, lv, 50)
			if err := s.Release(r); err != nil {
				t.Fatal(err)
			}
			mustReserve(t, s, lv, 60)
			return want{"root": 60, "root/a": 60}
		}},
		{"release a free reservation", func(t *testing.T, s Store) want {
			if err := s.Release(mustReserve(t, s, lv, 0)); err != nil {
				t.Fatal(err)
			}
			return want{"root": 0}
		}},
		{"duplicate key held once", func(t *testing.T, s Store) want {
			r := mustReserve(t, s, []Level{{"root", 100}, {"root", 100}}, 30)
			if err := s.Commit(r, 40); err != nil {
				t.Fatal(err)
			}
			return want{"root": 40}
		}},
		{"levels share keys across reservations", func(t *testing.T, s Store) want {
			a := mustReserve(t, s, []Level{{"root", 100}, {"root/a", 60}}, 30)
			b := mustReserve(t, s, []Level{{"root", 100}, {"root/b", 60}}, 30)
			if err := s.Commit(a, 10); err != nil {
				t.Fatal(err)
			}
			if err := s.Release(b); err != nil {
				t.Fatal(err)
			}
			return want{"root": 10, "root/a": 10, "root/b": 0}
		}},
		{"negative actual leaves the reservation open", func(t *testing.T, s Store) want {
			r := mustReserve(t, s, lv, 30)
			if err := s.Commit(r, -1); err == nil || !strings.Contains(err.Error(), "negative actual cost -1") {
				t.Errorf("Commit(-1): %v", err)
			}
			if err := s.Commit(r, 10); err != nil {
				t.Fatal(err)
			}
			return want{"root": 10, "root/a": 10}
		}},
	}
	forEachStore(t, func(t *testing.T, k storeKind) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := k.open(t)
				w := tt.run(t, s)
				wantSpent(t, s, w)
				wantSpent(t, k.reopen(t, s), w)
			})
		}
	})
}

// TestReservationEndsOnce: a second Commit or Release, a copy, a
// reservation of another store, nil or a zero Reservation are errors that
// change nothing.
func TestReservationEndsOnce(t *testing.T) {
	lv := []Level{{"root", 100}}
	tests := []struct {
		name string
		run  func(s, other Store) error
		want string
	}{
		{"commit twice", func(s, _ Store) error {
			r, _ := s.Reserve(lv, 10)
			s.Commit(r, 10)
			return s.Commit(r, 10)
		}, "already been committed or released"},
		{"release twice", func(s, _ Store) error {
			r, _ := s.Reserve(lv, 10)
			s.Release(r)
			return s.Release(r)
		}, "already been committed or released"},
		{"release after commit", func(s, _ Store) error {
			r, _ := s.Reserve(lv, 10)
			s.Commit(r, 10)
			return s.Release(r)
		}, "already been committed or released"},
		{"commit after release", func(s, _ Store) error {
			r, _ := s.Reserve(lv, 10)
			s.Release(r)
			return s.Commit(r, 10)
		}, "already been committed or released"},
		{"commit a copy", func(s, _ Store) error {
			r, _ := s.Reserve(lv, 10)
			s.Commit(r, 10)
			c := *r
			return s.Commit(&c, 10)
		}, "already been committed or released"},
		{"commit another store's", func(s, other Store) error {
			r, _ := other.Reserve(lv, 10)
			return s.Commit(r, 10)
		}, "made by another store"},
		{"release another store's", func(s, other Store) error {
			r, _ := other.Reserve(lv, 10)
			return s.Release(r)
		}, "made by another store"},
		{"commit nil", func(s, _ Store) error { return s.Commit(nil, 10) }, "nil reservation"},
		{"release nil", func(s, _ Store) error { return s.Release(nil) }, "nil reservation"},
		{"commit zero Reservation", func(s, _ Store) error { return s.Commit(&Reservation{}, 10) }, "made by another store"},
	}
	forEachStore(t, func(t *testing.T, k storeKind) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s, other := k.open(t), k.open(t)
				err := tt.run(s, other)
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("got %v, want an error containing %q", err, tt.want)
				}
				got := s.Spent("root")
				if got != 0 && got != 10 {
					t.Errorf("Spent = %d, want 0 or 10 (counted once)", got)
				}
				if want := got; k.reopen(t, s).Spent("root") != want {
					t.Errorf("spend changed across a restart")
				}
			})
		}
	})
}

func TestSpentUnknownKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		if got := k.open(t).Spent("nobody"); got != 0 {
			t.Errorf("Spent = %d", got)
		}
	})
}

// Spend past MaxInt64 stays at MaxInt64 rather than wrapping to negative,
// which would reopen the budget.
func TestSpendSaturates(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s := k.open(t)
		lv := []Level{{"a", 10}}
		r1, r2 := mustReserve(t, s, lv, 0), mustReserve(t, s, lv, 0)
		for _, r := range []*Reservation{r1, r2} {
			if err := s.Commit(r, math.MaxInt64); err != nil {
				t.Fatal(err)
			}
		}
		wantSpent(t, s, map[string]int64{"a": math.MaxInt64})
		if _, err := s.Reserve([]Level{{"a", math.MaxInt64}}, 0); !isExceeded(err) {
			t.Errorf("Reserve: %v", err)
		}
		wantSpent(t, k.reopen(t, s), map[string]int64{"a": math.MaxInt64})
	})
}

func TestExceededErrorMessage(t *testing.T) {
	tests := []struct {
		err  ExceededError
		want string
	}{
		{ExceededError{"I/del_root", 1000, 990, 20}, "budget exceeded at I/del_root: a call costing 20 microcents does not fit in the 10 left of 1000 (spent 990)"},
		{ExceededError{"I/del_root", 1000, 1000, 0}, "budget exceeded at I/del_root: spent 1000 of a budget of 1000 microcents"},
		{ExceededError{"I/del_root", 1000, 1200, 5}, "budget exceeded at I/del_root: spent 1200 of a budget of 1000 microcents"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("got  %q\nwant %q", got, tt.want)
		}
		if !errors.Is(&tt.err, ErrExceeded) {
			t.Error("not ErrExceeded")
		}
	}
}

func TestMemoryZeroValue(t *testing.T) {
	var m Memory
	r, err := m.Reserve([]Level{{"a", 10}}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Commit(r, 3); err != nil {
		t.Fatal(err)
	}
	wantSpent(t, &m, map[string]int64{"a": 3})
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
