//go:build unix

package budget

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
