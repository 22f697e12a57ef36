package chain

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/delegateos/delegateos/dct"
)

// TestMain lets the test binary act as a writer process for
// TestFileTwoProcesses.
func TestMain(m *testing.M) {
	if path := os.Getenv("CHAIN_TEST_WRITER_LOG"); path != "" {
		writer, _ := strconv.Atoi(os.Getenv("CHAIN_TEST_WRITER"))
		n, err := writeAll(nil, path, writer)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(n)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// racers is how many children every writer tries to insert.
const racers = 24

// raceRoot is the root of the race: root → alice, with one re-delegation.
func raceRoot() (*dct.Token, Delegation) {
	tok, err := dct.Create(rootParams(1))
	if err != nil {
		panic(err)
	}
	return tok, record(tok, dct.RootParentDelegationID, rootKey.ID(), 0, 0)
}

// raceChildren are the same children for every writer: alice → bob under
// delegation IDs 0x100...
func raceChildren(rootTok *dct.Token, root Delegation) ([]Delegation, error) {
	ds := make([]Delegation, racers)
	for i := range ds {
		tok, err := dct.Attenuate(rootTok, dct.AttenuateParams{Attenuator: aliceKey, Delegatee: bobKey.ID(), DelegationID: delID(0x100 + i), Now: t0})
		if err != nil {
			return nil, err
		}
		ds[i] = record(tok, root.ID, aliceKey.ID(), 1, 1+i)
	}
	return ds, nil
}

// writeAll has writer try to insert every race child into the log at path,
// each writer in its own order, through a File of its own, and returns how
// many it inserted. Any error but ErrDuplicate is returned.
func writeAll(s *File, path string, writer int) (int, error) {
	rootTok, root := raceRoot()
	ds, err := raceChildren(rootTok, root)
	if err != nil {
		return 0, err
	}
	if s == nil {
		if s, err = OpenFile(path); err != nil {
			return 0, err
		}
		defer s.Close()
	}
	inserted := 0
	for i := range ds {
		// Even writers go forward, odd ones backward, each from its own start.
		j := i
		if writer%2 == 1 {
			j = len(ds) - 1 - i
		}
		d := ds[(j+5*writer)%len(ds)]
		switch err := s.Insert(d); {
		case err == nil:
			inserted++
		case !errors.Is(err, ErrDuplicate):
			return inserted, fmt.Errorf("writer %d: %w", writer, err)
		}
	}
	return inserted, nil
}

// checkRace checks that every child was inserted exactly once, in total
// and in the log.
func checkRace(t *testing.T, path string, total int) {
	t.Helper()
	if total != racers {
		t.Fatalf("writers inserted %d children in all; want %d, each exactly once", total, racers)
	}
	ds, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != racers+1 {
		t.Fatalf("the log holds %d records; want %d", len(ds), racers+1)
	}
	data, _ := os.ReadFile(path)
	if n := bytes.Count(data, []byte("\n")); n != racers+1 {
		t.Fatalf("the log has %d lines; want %d", n, racers+1)
	}
}

func startRace(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "chain.log")
	_, root := raceRoot()
	s := mustOpen(t, path)
	mustInsert(t, s, root)
	s.Close()
	return path
}

// Goroutines sharing one File, and goroutines each with their own File on
// the same log, all insert the same children: each is inserted once.
func TestFileConcurrentGoroutines(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			path := startRace(t)
			var one *File
			if shared {
				one = mustOpen(t, path)
			}
			var mu sync.Mutex
			total := 0
			var wg sync.WaitGroup
			for w := range 6 {
				wg.Go(func() {
					n, err := writeAll(one, path, w)
					if err != nil {
						t.Error(err)
					}
					mu.Lock()
					total += n
					mu.Unlock()
				})
			}
			wg.Wait()
			checkRace(t, path, total)
		})
	}
}

// Two writer processes and two Files in this process insert the same
// children into one log at once: each is inserted once.
func TestFileTwoProcesses(t *testing.T) {
	path := startRace(t)
	type result struct {
		n   int
		err error
	}
	results := make(chan result, 4)
	for w := range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "CHAIN_TEST_WRITER_LOG="+path, "CHAIN_TEST_WRITER="+strconv.Itoa(w))
		go func() {
			out, err := cmd.Output()
			if err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					err = fmt.Errorf("%w: %s", err, ee.Stderr)
				}
				results <- result{err: err}
				return
			}
			n, err := strconv.Atoi(strings.TrimSpace(string(out)))
			results <- result{n, err}
		}()
	}
	for w := 2; w < 4; w++ {
		go func() {
			n, err := writeAll(nil, path, w)
			results <- result{n, err}
		}()
	}
	total := 0
	for range 4 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		total += r.n
	}
	checkRace(t, path, total)
}
