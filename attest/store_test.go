package attest

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

func stores(t *testing.T) map[string]Store {
	d, err := OpenDir(filepath.Join(t.TempDir(), "attestations"))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]Store{"memory": &Memory{}, "dir": d}
}

func TestStore(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			a := testAttestation(t)
			if _, err := s.Get(a.ID); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("missing: %v, want fs.ErrNotExist", err)
			}
			if err := s.Put(a); err != nil {
				t.Fatal(err)
			}
			if err := s.Put(a); err != nil {
				t.Fatalf("the same attestation again: %v", err)
			}
			got, err := s.Get(a.ID)
			if err != nil || !reflect.DeepEqual(got, a) {
				t.Fatalf("Get = %+v, %v", got, err)
			}
			got.Result.CostMicrocents = 0
			if again, _ := s.Get(a.ID); again.Result.CostMicrocents != a.Result.CostMicrocents {
				t.Error("a caller's change reached the store")
			}
			p := testParams()
			p.CostMicrocents = 999
			if err := s.Put(create(t, aliceKey, p)); !errors.Is(err, ErrConflict) {
				t.Errorf("another attestation under the same ID: %v, want ErrConflict", err)
			}
			p.ID = idN("att_", 1)
			if err := s.Put(create(t, aliceKey, p)); err != nil {
				t.Fatal(err)
			}
			if ids, err := s.List(); err != nil || !slices.Equal(ids, []string{idN("att_", 1), a.ID}) {
				t.Errorf("List = %v, %v", ids, err)
			}
			tampered := testAttestation(t)
			tampered.ID = idN("att_", 2)
			if err := s.Put(tampered); !errors.Is(err, ErrInvalidSignature) {
				t.Errorf("tampered: %v, want ErrInvalidSignature", err)
			}
			if err := s.Put(nil); err == nil {
				t.Error("nil: want an error")
			}
			for _, id := range []string{"", "../" + a.ID, "ATT_a1b2c3d4e5f6"} {
				if _, err := s.Get(id); err == nil {
					t.Errorf("Get(%q): want an error", id)
				}
			}
		})
	}
}

func TestDirFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "atts")
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", fi.Mode().Perm())
	}
	a := testAttestation(t)
	if err := d.Put(a); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, a.ID+".json")
	b, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(b, append(mustMarshal(t, a), '\n')) {
		t.Fatalf("file %s, %v", b, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, want 0600", fi.Mode().Perm())
	}
	pretty := indent(t, b)
	os.WriteFile(path, pretty, 0o600)
	if got, err := d.Get(a.ID); err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("pretty-printed: %v", err)
	}
	edited := bytes.Replace(pretty, []byte(`"costMicrocents": 1000`), []byte(`"costMicrocents": 10`), 1)
	os.WriteFile(path, edited, 0o600)
	if _, err := d.Get(a.ID); !errors.Is(err, ErrInvalidSignature) {
		t.Errorf("edited file: %v, want ErrInvalidSignature", err)
	}
	if err := d.Put(a); err == nil {
		t.Error("Put over an edited file: want an error")
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, edited) {
		t.Error("Put replaced a file")
	}
	os.WriteFile(filepath.Join(dir, idN("att_", 5)+".json"), mustMarshal(t, a), 0o600)
	if _, err := d.Get(idN("att_", 5)); !errors.Is(err, ErrMalformed) {
		t.Errorf("misfiled: %v, want ErrMalformed", err)
	}
}
