package revocation

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A record planted beside the list (LIST.append; found by the rtnonce red
// team) must not make a writer cut entries: before, a record naming an
// offset inside the first entry (with "}\n]\n" as the bytes to put back)
// made the next writer (a push, or `delegateos revoke`) truncate the list
// to its first entry, un-revoking the others. Anyone who can create a file
// beside the list (a sticky shared directory) could do it. Now a writer
// acts only on a record that names the list's inode and the hash of its
// bytes before the offset and saves only blanks and the bracket; any
// other stops it with an error naming the record, and the list is left.
func TestForgedAppendRecordDropsNoRevocation(t *testing.T) {
	k := testKey(t, 1)
	a, b, c := testEntry(t, k, testID("a"), ScopeChain), testEntry(t, k, testID("b"), ScopeChain), testEntry(t, k, testID("c"), ScopeChain)
	forged := map[string]func(path string, data []byte) (rec string, refused bool){
		// The red team's record: first version, no list named.
		"v1": func(path string, data []byte) (string, bool) {
			head := bytes.Index(data, []byte("},\n"))
			old := "}\n]\n"
			return fmt.Sprintf("delegateos-revocation-append %d %d %x\n", head, head+len(old), old), true
		},
		// Made by someone who can read the list: its inode and hash are
		// right, but what it saves is more than blanks and the bracket.
		"brace": func(path string, data []byte) (string, bool) {
			head := bytes.Index(data, []byte("},\n"))
			return testRecord(t, path, head, append(data[:head:head], "}\n]\n"...)), true
		},
		// Right inode and hash, saving "\n]\n" after the first entry: the
		// list from there is whole (a comma and entries), nothing is cut.
		"after first entry": func(path string, data []byte) (string, bool) {
			head := bytes.Index(data, []byte("},\n")) + 1
			return testRecord(t, path, head, append(data[:head:head], "\n]\n"...)), false
		},
		// Another list's record (copied with the list from another host,
		// restored from a backup).
		"other inode": func(path string, data []byte) (string, bool) {
			other := filepath.Join(t.TempDir(), "other.json")
			if err := os.WriteFile(other, data, 0o644); err != nil {
				t.Fatal(err)
			}
			head := bytes.Index(data, []byte("},\n")) + 1
			return testRecord(t, other, head, append(data[:head:head], "\n]\n"...)), true
		},
		// The right inode, another list's first bytes.
		"other hash": func(path string, data []byte) (string, bool) {
			head := bytes.Index(data, []byte("},\n")) + 1
			fake := append([]byte{}, data[:head]...)
			fake[len(fake)-3] ^= 1
			return testRecord(t, path, head, append(fake, "\n]\n"...)), true
		},
	}
	for name, forge := range forged {
		for _, viaPath := range []bool{false, true} {
			t.Run(fmt.Sprint(name, "/path=", viaPath), func(t *testing.T) {
				path, f := newListFile(t, a, b, c)
				data, _ := os.ReadFile(path)
				rec, refused := forge(path, data)
				if err := os.WriteFile(path+".append", []byte(rec), 0o666); err != nil {
					t.Fatal(err)
				}
				d := testEntry(t, k, testID("d"), ScopeChain)
				var err error
				if viaPath {
					err = Append(path, d)
				} else {
					_, err = f.Append(d)
				}
				if refused != (err != nil) {
					t.Fatalf("append: %v (want refused: %v)", err, refused)
				}
				if err != nil && !strings.Contains(err.Error(), filepath.Base(path)+".append") {
					t.Fatalf("the error does not name the record: %v", err)
				}
				got := fileEntries(t, path)
				if !slices.Contains(got, b) || !slices.Contains(got, c) {
					t.Fatalf("after a forged %s.append, the list holds %d entries: b, c dropped", filepath.Base(path), len(got))
				}
				if refused {
					if after, _ := os.ReadFile(path); !bytes.Equal(after, data) {
						t.Fatalf("a refused writer changed the list:\n%s", after)
					}
				}
				if _, revoked, _ := f.Revoked([]string{b.RevocationID}, []string{b.RevokedBy}); !revoked {
					t.Fatal("the gate's File no longer holds b as revoked")
				}
			})
		}
	}
}

// A server starting beside a planted record and a list that reads, or a
// torn list with a record that is not its own, never cuts entries.
func TestOpenFileIgnoresForgedRecord(t *testing.T) {
	k := testKey(t, 1)
	a, b := testEntry(t, k, testID("a"), ScopeChain), testEntry(t, k, testID("b"), ScopeChain)
	path, _ := newListFile(t, a, b)
	data, _ := os.ReadFile(path)
	head := bytes.Index(data, []byte("},\n"))
	// The list torn after b (as a crash would leave it), and a record that
	// would cut it back to a: refused, the server fails closed.
	torn := append(append([]byte{}, data[:len(data)-2]...), ",\n  {"...)
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data[:head])
	fi, _ := os.Stat(path)
	rec := formatRecord(int64(head), int64(head+4), fi, sum[:], []byte("}\n]\n"))
	if err := os.WriteFile(path+".append", []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenFile(path); err == nil {
		defer f.Close()
		if _, revoked, err := f.Revoked([]string{b.RevocationID}, []string{b.RevokedBy}); err == nil && !revoked {
			t.Fatal("a server starting beside a forged record takes b's token")
		}
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, torn) {
		t.Fatalf("the list was changed on a forged record's word:\n%s", after)
	}
}

// Red team (rtnonce): writeRecord opens path+".append" with O_CREATE and
// follows a symbolic link there, then truncates what it opened: a link
// planted beside the list makes every push truncate (and overwrite) a file
// of the server's choosing (its key, its audit log).
func TestAppendRecordSymlinkTruncatesNothing(t *testing.T) {
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
