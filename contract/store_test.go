package contract

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
)

func stores(t *testing.T) map[string]Store {
	d, err := OpenDir(filepath.Join(t.TempDir(), "contracts"))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]Store{"memory": &Memory{}, "dir": d}
}

func TestStore(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			c := testContract(t)
			if ids, err := s.List(); err != nil || len(ids) != 0 {
				t.Fatalf("empty store lists %v, %v", ids, err)
			}
			if _, err := s.Get(c.ID); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Get of a missing contract: %v, want fs.ErrNotExist", err)
			}
			if err := s.Put(c); err != nil {
				t.Fatal(err)
			}
			if err := s.Put(c); err != nil {
				t.Fatalf("storing the same contract again: %v", err)
			}
			got, err := s.Get(c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c) {
				t.Errorf("Get returned\n%+v\nwant\n%+v", got, c)
			}
			got.Task.Title = "changed by the caller"
			if again, _ := s.Get(c.ID); again.Task.Title != c.Task.Title {
				t.Error("a caller's change to a returned contract reached the store")
			}

			p := testParams()
			p.Title = "Another task under the same ID"
			other, err := Create(rootKey, p, t0)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Put(other); !errors.Is(err, ErrConflict) {
				t.Errorf("a different contract under the same ID: %v, want ErrConflict", err)
			}
			if again, _ := s.Get(c.ID); !reflect.DeepEqual(again, c) {
				t.Error("the stored contract was replaced")
			}

			p.ID = "ct_000000000001"
			second, err := Create(rootKey, p, t0)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Put(second); err != nil {
				t.Fatal(err)
			}
			if ids, err := s.List(); err != nil || !slices.Equal(ids, []string{"ct_000000000001", c.ID}) {
				t.Errorf("List = %v, %v", ids, err)
			}
		})
	}
}

func TestStoreRefusesUnverified(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			c := testContract(t)
			c.Constraints.MaxBudgetMicrocents++
			if err := s.Put(c); !errors.Is(err, ErrInvalidSignature) {
				t.Errorf("tampered: %v, want ErrInvalidSignature", err)
			}
			c = testContract(t)
			c.Version = ""
			if err := s.Put(c); !errors.Is(err, ErrMalformed) {
				t.Errorf("malformed: %v, want ErrMalformed", err)
			}
			if err := s.Put(nil); err == nil {
				t.Error("nil: want an error")
			}
			if ids, _ := s.List(); len(ids) != 0 {
				t.Errorf("the store holds %v", ids)
			}
			for _, id := range []string{"", "../ct_a1b2c3d4e5f6", "ct_a1b2c3d4e5f6/..", "ct_A1B2C3D4E5F6"} {
				if _, err := s.Get(id); err == nil {
					t.Errorf("Get(%q): want an error", id)
				}
			}
		})
	}
}

func TestDirFiles(t *testing.T) {
	dir := t.TempDir()
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := testContract(t)
	if err := d.Put(c); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, c.ID+".json")
	if p, _ := d.Path(c.ID); p != path {
		t.Errorf("Path = %q, want %q", p, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(mustMarshal(t, c), '\n'); !bytes.Equal(b, want) {
		t.Errorf("file holds\n%s\nwant\n%s", b, want)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", fi.Mode())
	}

	// A hand-formatted file of the same contract is read, and Put of the
	// contract leaves it as it is.
	pretty := indent(t, b)
	if err := os.WriteFile(path, pretty, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := d.Get(c.ID); err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("pretty-printed file: %v", err)
	}
	if err := d.Put(c); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, pretty) {
		t.Error("Put rewrote a file holding the same contract")
	}

	// An edited file is refused on Get and never replaced by Put.
	edited := bytes.Replace(pretty, []byte(`5000`), []byte(`50000`), 1)
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get(c.ID); !errors.Is(err, ErrInvalidSignature) {
		t.Errorf("edited file: %v, want ErrInvalidSignature", err)
	}
	if err := d.Put(c); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Put over an invalid file: %v, want an error", err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, edited) {
		t.Error("Put replaced an invalid file")
	}

	// A valid contract stored under another contract's name is refused.
	p := testParams()
	p.ID = "ct_000000000002"
	other, _ := Create(rootKey, p, t0)
	if err := os.WriteFile(filepath.Join(dir, "ct_000000000001.json"), mustMarshal(t, other), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get("ct_000000000001"); !errors.Is(err, ErrMalformed) {
		t.Errorf("misfiled contract: %v, want ErrMalformed", err)
	}

	// Other files in the directory are not listed.
	for _, name := range []string{"notes.txt", "ct_xyz.json", ".ct_000000000003.json.tmp-1"} {
		os.WriteFile(filepath.Join(dir, name), nil, 0o644)
	}
	os.Mkdir(filepath.Join(dir, "ct_000000000004.json"), 0o755)
	if ids, err := d.List(); err != nil || !slices.Equal(ids, []string{"ct_000000000001", c.ID}) {
		t.Errorf("List = %v, %v", ids, err)
	}
	// A directory under a contract's name is not a contract.
	if _, err := d.Get("ct_000000000004"); err == nil {
		t.Error("Get of a directory: want an error")
	}
	// An oversized file is refused before it is parsed.
	big := filepath.Join(dir, "ct_000000000005.json")
	os.WriteFile(big, bytes.Repeat([]byte(" "), MaxContractSize+1), 0o644)
	if _, err := d.Get("ct_000000000005"); !errors.Is(err, ErrMalformed) {
		t.Errorf("oversized file: %v, want ErrMalformed", err)
	}
}

func TestOpenDirNotADirectory(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := OpenDir(f); err == nil {
		t.Error("want an error")
	}
}

// Concurrent writers of different contracts under one ID: exactly one is
// stored, every other gets ErrConflict, and the file is never replaced.
func TestDirConcurrentPut(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	var contracts []*TaskContract
	for i := range n {
		p := testParams()
		p.Title = fmt.Sprintf("variant %d", i)
		c, err := Create(rootKey, p, t0)
		if err != nil {
			t.Fatal(err)
		}
		contracts = append(contracts, c)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := OpenDir(dir) // one handle each, as separate processes would
			if err != nil {
				errs[i] = err
				return
			}
			errs[i] = d.Put(contracts[i])
		}()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if won >= 0 {
				t.Fatalf("both %d and %d were stored", won, i)
			}
			won = i
		case !errors.Is(err, ErrConflict):
			t.Errorf("writer %d: %v", i, err)
		}
	}
	if won < 0 {
		t.Fatal("nothing was stored")
	}
	d, _ := OpenDir(dir)
	if got, err := d.Get(contracts[won].ID); err != nil || got.Task.Title != contracts[won].Task.Title {
		t.Errorf("stored %v, %v; want variant %d", got, err, won)
	}
}
