//go:build unix

package budget

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/redistest"
)

// mkdirMode makes dir with mode (past the umask).
func mkdirMode(t *testing.T, dir string, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Every directory on the way to the state directory, through symbolic
// links too, is checked: one another user can write (not sticky) is
// refused; a sticky one (/tmp), a missing tail and safe links are not.
func TestCheckStateDirPath(t *testing.T) {
	root := t.TempDir()
	open := mkdirMode(t, filepath.Join(root, "open"), 0o777)
	mkdirMode(t, filepath.Join(open, "state"), 0o700)
	group := mkdirMode(t, filepath.Join(root, "group"), 0o770)
	mkdirMode(t, filepath.Join(group, "a", "state"), 0o700)
	sticky := mkdirMode(t, filepath.Join(root, "sticky"), os.ModeSticky|0o777)
	mkdirMode(t, filepath.Join(sticky, "state"), 0o700)
	safe := mkdirMode(t, filepath.Join(root, "safe", "deep"), 0o755)
	if err := os.Symlink(filepath.Join(open, "state"), filepath.Join(root, "safe", "to-open")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../open", filepath.Join(safe, "rel-to-open")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("deep", filepath.Join(root, "safe", "to-deep")); err != nil {
		t.Fatal(err)
	}
	// A link through a link: the second lies in the open directory.
	if err := os.Symlink(filepath.Join(open, "state"), filepath.Join(open, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(open, "link"), filepath.Join(root, "safe", "chain")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("loop", filepath.Join(root, "safe", "loop")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, want string }{
		{filepath.Join(open, "state"), open + " on its path is writable by its group or by other users and not sticky"},
		{filepath.Join(open, "state", "not", "yet"), open + " on its path is writable"},
		{filepath.Join(group, "a", "state"), group + " on its path is writable"},
		{filepath.Join(root, "safe", "to-open"), open + " on its path is writable"},
		{filepath.Join(safe, "rel-to-open", "state"), open + " on its path is writable"},
		{filepath.Join(safe, "..", "..", "open", "state"), open + " on its path is writable"},
		{filepath.Join(root, "safe", "chain"), open + " on its path is writable"},
		{filepath.Join(root, "safe", "loop", "state"), "symbolic links on its path"},
	} {
		err := CheckStateDir(c.dir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckStateDir(%s) = %v; want an error saying %q", c.dir, err, c.want)
		}
	}
	for _, dir := range []string{
		filepath.Join(sticky, "state"),
		filepath.Join(sticky, "not", "yet"),
		filepath.Join(safe, "state"),
		filepath.Join(root, "safe", "to-deep", "state"),
		filepath.Join(root, "missing", "state"),
		filepath.Join(os.TempDir(), "delegateos-state-not-made"),
	} {
		if err := CheckStateDir(dir); err != nil {
			t.Errorf("CheckStateDir(%s) = %v; want none", dir, err)
		}
	}
}

// A directory or a symbolic link of another user (not root) on the way
// is refused: they could rename or re-point it. Needs root, to make
// another user's files.
func TestCheckStateDirPathOwners(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root, to make files of another user (CI runs as root)")
	}
	const other = 54321
	root := t.TempDir()
	theirs := mkdirMode(t, filepath.Join(root, "theirs"), 0o755)
	mkdirMode(t, filepath.Join(theirs, "state"), 0o700)
	if err := os.Chown(theirs, other, other); err != nil {
		t.Fatal(err)
	}
	mine := mkdirMode(t, filepath.Join(root, "mine"), 0o700)
	link := filepath.Join(root, "link")
	if err := os.Symlink(mine, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, other, other); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, want string }{
		{filepath.Join(theirs, "state"), "the directory " + theirs + " on its path is owned by the user 54321"},
		{filepath.Join(link, "state"), "the symbolic link " + link + " on its path is owned by the user 54321"},
	} {
		err := CheckStateDir(c.dir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckStateDir(%s) = %v; want an error saying %q", c.dir, err, c.want)
		}
	}
	if err := CheckStateDir(filepath.Join(mine, "state")); err != nil {
		t.Errorf("CheckStateDir of a directory of this user's = %v; want none", err)
	}
}

// plantTheirs makes dir as another user's (uid 54321), mode 0777: what
// that user does in a sticky directory (/tmp) where the state directory's
// path is still missing. Needs root.
func plantTheirs(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 54321, 54321); err != nil {
		t.Fatal(err)
	}
}

// The state directory's path missing below a sticky directory: another
// user makes the missing component between the check at start
// (CheckStateDir, in Open or the gate) and the proxy's first write, which
// makes the directory. The store refuses to open, naming that component,
// and makes nothing in it (os.MkdirAll took the other user's directory
// for its own and made the state directory inside).
func TestOpenRedisStateDirPlantedAfterCheck(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root, to make files of another user (CI runs as root)")
	}
	srv := redistest.Start(t)
	sticky := mkdirMode(t, filepath.Join(t.TempDir(), "sticky"), os.ModeSticky|0o777)
	planted := filepath.Join(sticky, "a")
	dir := filepath.Join(planted, "state")
	if err := CheckStateDir(dir); err != nil {
		t.Fatalf("CheckStateDir(%s) = %v; want none (the path is missing below a sticky directory)", dir, err)
	}
	plantTheirs(t, planted)
	s, err := OpenRedisIn(srv.URL(), dir)
	if err == nil {
		s.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "the directory "+planted+" on its path is owned by the user 54321") {
		t.Errorf("OpenRedisIn with %s made by another user after the check: %v; want a refusal naming it", planted, err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the state directory %s was made in the other user's directory (%v)", dir, err)
	}
}

// MakeStateDir makes each missing component itself (0700): one another
// user makes first, between the walk and its os.Mkdir, is checked before
// anything is made in it, and refused.
func TestMakeStateDirPlantedBeforeMkdir(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root, to make files of another user (CI runs as root)")
	}
	sticky := mkdirMode(t, filepath.Join(t.TempDir(), "sticky"), os.ModeSticky|0o777)
	planted := filepath.Join(sticky, "a")
	dir := filepath.Join(planted, "b", "state")
	stateMkdirHook = func(p string) {
		if p == planted {
			plantTheirs(t, planted)
		}
	}
	t.Cleanup(func() { stateMkdirHook = nil })
	err := MakeStateDir(dir)
	if err == nil || !strings.Contains(err.Error(), "the directory "+planted+" on its path is owned by the user 54321") {
		t.Errorf("MakeStateDir(%s) with %s made by another user first: %v; want a refusal naming it", dir, planted, err)
	}
	if _, err := os.Lstat(filepath.Join(planted, "b")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("MakeStateDir made %s/b in the other user's directory (%v)", planted, err)
	}

	// A component made meanwhile by this user (another proxy starting),
	// 0700: taken; what is made is 0700 down to the state directory.
	stateMkdirHook = func(p string) {
		if p == filepath.Join(sticky, "c") {
			os.Mkdir(p, 0o700)
		}
	}
	dir = filepath.Join(sticky, "c", "d", "state")
	if err := MakeStateDir(dir); err != nil {
		t.Fatalf("MakeStateDir(%s) = %v; want none", dir, err)
	}
	for _, p := range []string{filepath.Join(sticky, "c", "d"), dir} {
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v; want a directory, 0700", p, fi, err)
		}
	}
	// Made already: nothing to do, the check only.
	stateMkdirHook = func(p string) { t.Errorf("MakeStateDir of an existing directory made %s", p) }
	if err := MakeStateDir(dir); err != nil {
		t.Fatalf("MakeStateDir(%s) again = %v; want none", dir, err)
	}
	// A file in the way is refused, naming it.
	file := filepath.Join(sticky, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	stateMkdirHook = nil
	if err := MakeStateDir(filepath.Join(file, "state")); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("MakeStateDir under the file %s = %v; want an error naming it", file, err)
	}
}
