package revocation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestLoadMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "revocatoins.json")
	_, err := Load(path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("got %v, want fs.ErrNotExist", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "never read as empty") {
		t.Errorf("message does not explain: %v", err)
	}
}

func TestLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	bad := testEntry(t, testKey(t, 1), testID("a"), ScopeBlock)
	bad.Scope = ScopeChain
	tests := map[string]string{
		"empty file":    "",
		"garbage":       "not json",
		"bad signature": string(must(marshalEntries([]Entry{bad}, true))),
	}
	for name, content := range tests {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	if _, err := Load(dir); err == nil {
		t.Error("a directory: want error")
	}
}

func TestAppend(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "revocations.json")
	k := testKey(t, 1)
	a := testEntry(t, k, testID("a"), ScopeChain)
	b := testEntry(t, k, testID("b"), ScopeBlock)
	for _, e := range []Entry{a, a, b, a} {
		if err := Append(path, e); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := os.Stat(path)
	if err := Append(path, b); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(path); !os.SameFile(before, after) {
		t.Error("appending an entry the list holds rewrote the file")
	}
	// A new process reads what was written.
	l, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.Entries(), []Entry{a, b}) {
		t.Errorf("entries after restart: %+v", l.Entries())
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %04o, want 0644", fi.Mode().Perm())
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	hidden, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(hidden) != 0 || len(names) > 2 {
		t.Errorf("left behind: %v %v", names, hidden)
	}
}

func TestAppendRefuses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "list.json")
	bad := testEntry(t, testKey(t, 1), testID("a"), ScopeBlock)
	bad.Scope = ScopeChain
	if err := Append(path, bad); !errors.Is(err, ErrInvalidSignature) {
		t.Errorf("unverified entry: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Error("a refused entry created the file")
	}
	// A list that does not verify is not extended, nor replaced.
	corrupt := []byte("[{\"revocationId\":1}]\n")
	if err := os.WriteFile(path, corrupt, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Append(path, testEntry(t, testKey(t, 1), testID("b"), ScopeChain)); err == nil {
		t.Error("appending to a corrupt list: want error")
	}
	if got, _ := os.ReadFile(path); string(got) != string(corrupt) {
		t.Errorf("corrupt list was changed to %s", got)
	}
	if err := Append(filepath.Join(dir, "no such dir", "list.json"), testEntry(t, testKey(t, 1), testID("b"), ScopeChain)); err == nil {
		t.Error("missing directory: want error")
	}
}

func TestAppendKeepsMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	path := filepath.Join(t.TempDir(), "list.json")
	k := testKey(t, 1)
	if err := Append(path, testEntry(t, k, testID("a"), ScopeChain)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Append(path, testEntry(t, k, testID("b"), ScopeChain)); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want the file's 0600 kept", fi.Mode().Perm())
	}
}

func TestAppendThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.json")
	link := filepath.Join(dir, "link.json")
	k := testKey(t, 1)
	if err := Append(target, testEntry(t, k, testID("a"), ScopeChain)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Skip("no symlinks:", err)
	}
	if err := Append(link, testEntry(t, k, testID("b"), ScopeChain)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Error("the link was replaced")
	}
	if l, err := Load(target); err != nil || l.Len() != 2 {
		t.Errorf("target: %v, %v", l, err)
	}
}

// concurrentEntries returns n distinct entries for writer w.
func concurrentEntries(t testing.TB, w, n int) []Entry {
	k := testKey(t, byte(w+1))
	entries := make([]Entry, n)
	for i := range entries {
		entries[i] = testEntry(t, k, testID(fmt.Sprintf("writer %d entry %d", w, i)), ScopeChain)
	}
	return entries
}

func checkAllPresent(t *testing.T, path string, writers, each int) {
	t.Helper()
	l, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if l.Len() != writers*each {
		t.Errorf("list has %d entries, want %d: appends were lost", l.Len(), writers*each)
	}
	for w := range writers {
		for _, e := range concurrentEntries(t, w, each) {
			if !l.contains(e) {
				t.Errorf("lost %+v", e)
			}
		}
	}
}

func TestAppendConcurrentGoroutines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "list.json")
	const writers, each = 8, 10
	var wg sync.WaitGroup
	for w := range writers {
		entries := concurrentEntries(t, w, each)
		wg.Go(func() {
			for _, e := range entries {
				if err := Append(path, e); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	checkAllPresent(t, path, writers, each)
}

const (
	helperPathEnv   = "REVOCATION_TEST_APPEND_PATH"
	helperWriterEnv = "REVOCATION_TEST_APPEND_WRITER"
	helperEach      = 15
)

// TestAppendHelperProcess is a writer process of
// TestAppendConcurrentProcesses; on its own it does nothing.
func TestAppendHelperProcess(t *testing.T) {
	path := os.Getenv(helperPathEnv)
	if path == "" {
		t.Skip("helper process for TestAppendConcurrentProcesses")
	}
	w, err := strconv.Atoi(os.Getenv(helperWriterEnv))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range concurrentEntries(t, w, helperEach) {
		if err := Append(path, e); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAppendConcurrentProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	path := filepath.Join(t.TempDir(), "list.json")
	const writers = 4
	cmds := make([]*exec.Cmd, writers)
	for w := range cmds {
		cmd := exec.Command(exe, "-test.run=^TestAppendHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperPathEnv+"="+path, helperWriterEnv+"="+strconv.Itoa(w))
		cmds[w] = cmd
	}
	outs := make([][]byte, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w, cmd := range cmds {
		wg.Go(func() { outs[w], errs[w] = cmd.CombinedOutput() })
	}
	wg.Wait()
	for w := range cmds {
		if errs[w] != nil {
			t.Fatalf("writer %d: %v\n%s", w, errs[w], outs[w])
		}
	}
	checkAllPresent(t, path, writers, helperEach)
}
