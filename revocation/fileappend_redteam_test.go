//go:build redteam

package revocation

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Red team (rtnonce): a writer trusts path+".append" as its own record.
// A record naming an offset inside the first entry (with "}\n]\n" as the
// bytes to put back) makes the next writer (a push, or `delegateos
// revoke`) truncate the list to its first entry: every later revocation is
// gone, from the file and from the gate's File, which re-reads it. Anyone
// who can create a file beside the list (a sticky shared directory, where
// the list itself cannot be replaced) can thus un-revoke tokens.
func TestRedteamForgedAppendRecordDropsRevocations(t *testing.T) {
	for _, viaPath := range []bool{false, true} {
		t.Run(fmt.Sprint("path=", viaPath), func(t *testing.T) {
			k := testKey(t, 1)
			a, b, c := testEntry(t, k, testID("a"), ScopeChain), testEntry(t, k, testID("b"), ScopeChain), testEntry(t, k, testID("c"), ScopeChain)
			path, f := newListFile(t, a, b, c)
			data, _ := os.ReadFile(path)
			head := bytes.Index(data, []byte("},\n")) // the closing brace of the first entry
			old := "}\n]\n"
			rec := fmt.Sprintf("%s%d %d %x\n", appendRecord, head, head+len(old), old)
			if err := os.WriteFile(path+".append", []byte(rec), 0o666); err != nil {
				t.Fatal(err)
			}
			d := testEntry(t, k, testID("d"), ScopeChain)
			if viaPath {
				if err := Append(path, d); err != nil {
					t.Fatal(err)
				}
			} else if _, err := f.Append(d); err != nil {
				t.Fatal(err)
			}
			if got := fileEntries(t, path); !slices.Contains(got, b) || !slices.Contains(got, c) {
				t.Fatalf("after a forged %s.append, the list holds %d entries: b, c dropped", filepath.Base(path), len(got))
			}
			if _, revoked, _ := f.Revoked([]string{b.RevocationID}, []string{b.RevokedBy}); !revoked {
				t.Fatal("the gate's File no longer holds b as revoked")
			}
		})
	}
}

// Red team (rtnonce): writeRecord opens path+".append" with O_CREATE and
// follows a symbolic link there, then truncates what it opened: a link
// planted beside the list makes every push truncate (and overwrite) a file
// of the server's choosing (its key, its audit log).
func TestRedteamAppendRecordSymlinkTruncatesTarget(t *testing.T) {
	k := testKey(t, 1)
	path, f := newListFile(t, testEntry(t, k, testID("a"), ScopeChain))
	victim := filepath.Join(t.TempDir(), "server.key")
	if err := os.WriteFile(victim, []byte("secret key material\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, path+".append"); err != nil {
		t.Fatal(err)
	}
	_, err := f.Append(testEntry(t, k, testID("b"), ScopeChain))
	if got, _ := os.ReadFile(victim); string(got) != "secret key material\n" {
		t.Fatalf("a push through a symlinked record (err %v) left the link's target as %q", err, got)
	}
}
