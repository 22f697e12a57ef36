package budget

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/redisconn"
)

// A state directory lists every instance it ran as: the same one once
// however many proxies open it, a copy of it (another directory) another
// that keeps the list it was copied with, and a list that is not one
// delegateos writes refuses the start.
func TestMachineInstance(t *testing.T) {
	dir := t.TempDir()
	tok, seen, err := machineInstance(dir, "m1")
	if _, ok := seen[tok]; err != nil || len(tok) != 24 || !ok || len(seen) != 1 {
		t.Fatalf("first instance: %q %v %v", tok, seen, err)
	}
	again, seen, err := machineInstance(dir, "m1")
	if err != nil || again != tok || len(seen) != 1 {
		t.Fatalf("the same directory again: %q %v %v; want %q, one instance", again, seen, err, tok)
	}
	b, _ := os.ReadFile(filepath.Join(dir, instancesFile))
	copied := t.TempDir()
	if err := os.WriteFile(filepath.Join(copied, instancesFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	other, seen, err := machineInstance(copied, "m1")
	if err != nil || other == tok || seen[tok] != 0 || seen[other] != 1 || len(seen) != 2 {
		t.Fatalf("a copy: %q %v %v; want a new instance, ranked after %q, which it ran as before", other, seen, err, tok)
	}
	if err := os.WriteFile(filepath.Join(dir, instancesFile), []byte("not a token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := machineInstance(dir, "m1"); err == nil || !strings.Contains(err.Error(), "is not a list of machine instances") {
		t.Fatalf("a corrupt list: %v; want refused", err)
	}
	// The list deleted while a counts file names the instances that
	// raised its keys: refused, not begun again.
	os.Remove(filepath.Join(dir, instancesFile))
	if err := os.WriteFile(filepath.Join(dir, "store-0011223344556677.seen.json"), []byte(`{"id":"i","gen":1,"machine":"m1","minst":{"k":"`+tok+`"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := machineInstance(dir, "m1"); err == nil || !strings.Contains(err.Error(), "is gone (deleted)") {
		t.Fatalf("the list deleted under counts naming its instances: %v; want refused", err)
	}
}

// A list of an earlier version, whose lines may carry a mark of the boot
// and path after the token, is read, the marks ignored; a new instance
// is listed by its token alone; a mark that is not one refuses it.
func TestMachineInstanceListOfAnEarlierVersion(t *testing.T) {
	dir := t.TempDir()
	old, marked, mark := strings.Repeat("ab", 12), strings.Repeat("cd", 12), strings.Repeat("ef", 12)
	if err := os.WriteFile(filepath.Join(dir, instancesFile), []byte(old+"\n"+marked+" "+mark+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, rank, err := machineInstance(dir, "m1")
	if err != nil || len(rank) != 3 || rank[old] != 0 || rank[marked] != 1 || rank[tok] != 2 {
		t.Fatalf("%q %v %v; want the earlier two instances ranked first, this one last", tok, rank, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, instancesFile))
	if want := old + "\n" + marked + " " + mark + "\n" + tok + "\n"; string(b) != want {
		t.Fatalf("the list: %q; want %q", b, want)
	}
	// Read again without adding: the same.
	if rank2, err := readInstances(dir, ""); err != nil || len(rank2) != 3 || rank2[tok] != 2 {
		t.Fatalf("read again: %v %v", rank2, err)
	}
	if err := os.WriteFile(filepath.Join(dir, instancesFile), []byte(tok+" not-a-mark\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readInstances(dir, ""); err == nil {
		t.Fatal("a line with a mark that is not one was read")
	}
}

// A running proxy whose state directory is no longer the one at its path
// (a symbolic link pointed at a copy: the directory moved to another
// disk) takes over the field of the instance of the directory now there,
// and runs as it from then on; a proxy on a copy that is still the
// directory at its path (another container of the same image: the same
// boot, the same path) refuses the field of the original's instance,
// which its list names as earlier than its own that last raised the key:
// the same boot and the same path are no longer "the directory moved".
func TestTakeOverFollowsTheDirectoryAtItsPath(t *testing.T) {
	base := t.TempDir()
	d1, d2, link := filepath.Join(base, "d1"), filepath.Join(base, "d2"), filepath.Join(base, "state")
	for _, d := range []string{d1, d2} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	point := func(to string) {
		t.Helper()
		os.Remove(link)
		if err := os.Symlink(to, link); err != nil {
			t.Fatal(err)
		}
	}
	open := func() *Redis {
		t.Helper()
		s := &Redis{url: "redis://test", stateDir: link, machine: "m1"}
		var err error
		if s.instance, s.irank, err = machineInstance(link, "m1"); err != nil {
			t.Fatal(err)
		}
		return s
	}
	point(d1)
	p1 := open()
	p1.minst = map[string]string{"k": p1.instance}
	b, err := os.ReadFile(filepath.Join(d1, instancesFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d2, instancesFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	point(d2)
	p2 := open()
	p2.minst = map[string]string{"k": p2.instance}
	if p2.instance == p1.instance || p2.irank[p1.instance] != 0 || p2.irank[p2.instance] != 1 {
		t.Fatalf("the proxy started on the copy: %q %v; want a new instance after %q", p2.instance, p2.irank, p1.instance)
	}
	// The proxy started on d1, its path now d2's.
	was := p1.instance
	if err := p1.takeOver("k", "R", p2.instance); err != nil || p1.instance != p2.instance || p1.irank[p2.instance] != 1 {
		t.Fatalf("the running proxy whose directory moved: %v, instance %q %v; want it to run as %q", err, p1.instance, p1.irank, p2.instance)
	}
	if err := p1.takeOver("k", "R", p2.instance); err != nil {
		t.Fatalf("again: %v", err)
	}
	// The proxy on d2, still the directory at its path, finds the field
	// raised by d1's instance (another container of the image: its copy
	// of the directory at the same path): refused, naming its own
	// instance as the later one.
	var se *SharedMachineError
	if err := p2.takeOver("k", "R", was); !errors.As(err, &se) || se.Later != p2.instance || !errors.Is(err, redisconn.ErrReset) {
		t.Fatalf("an earlier instance of the same boot and path writing after this one, the directory still at its path: %v; want a SharedMachineError naming %q as later", err, p2.instance)
	}
	// An instance no list names: refused as another host's.
	if err := p2.takeOver("k", "R", strings.Repeat("01", 12)); !errors.As(err, &se) || se.Later != "" {
		t.Fatalf("an instance the directory never ran as: %v", err)
	}
}
