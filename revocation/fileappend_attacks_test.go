package revocation

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Red team (rtnonce), held: a record file that is a symbolic link to
// another file (not a record) makes the push fail; the link's target is
// not truncated.
// (Was TestRedteamAppendRecordSymlinkRefused.)
func TestFileAppendRecordSymlinkRefused(t *testing.T) {
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
	if got, _ := os.ReadFile(victim); string(got) != "secret key material\n" || err == nil {
		t.Fatalf("push through a symlinked record: err %v, target %q", err, got)
	}
}

// Red team (rtnonce), held: kill -9 mid-append, simulated by every prefix
// of the appended tail with the record beside it. The gate's File, open
// before, refuses every token (fails closed) while the list is torn, never
// forgets an old entry; a server starting (OpenFile) and the next writer
// both undo the torn append, and the entry then appended lands.
// (Was TestRedteamTornAppendEveryPrefix.)
func TestFileAppendTornAtEveryPrefixFailsClosed(t *testing.T) {
	k := testKey(t, 1)
	a, b := testEntry(t, k, testID("a"), ScopeChain), testEntry(t, k, testID("b"), ScopeChain)
	c := testEntry(t, k, testID("c"), ScopeChain)
	entry := must(entryJSON(c))
	tail := append(append([]byte(",\n  "), entry...), "\n]\n"...)
	for cut := 0; cut < len(tail); cut += 7 {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			path, gate := newListFile(t, a, b)
			data, _ := os.ReadFile(path)
			head := listHead(data)
			rec := testRecord(t, path, head, data)
			if err := os.WriteFile(path+".append", []byte(rec), 0o644); err != nil {
				t.Fatal(err)
			}
			torn := append(append([]byte{}, data[:head]...), tail[:cut]...)
			if cut < len(data)-head {
				torn = append(torn, data[head+cut:]...)
			}
			if err := os.WriteFile(path, torn, 0o644); err != nil {
				t.Fatal(err)
			}
			if id, revoked, err := gate.Revoked([]string{b.RevocationID}, []string{b.RevokedBy}); err == nil && !revoked {
				t.Fatalf("torn at %d: a revoked token is accepted (%q)", cut, id)
			}
			srv, err := OpenFile(path)
			if err != nil {
				t.Fatalf("torn at %d: a server starting: %v", cut, err)
			}
			srv.Close()
			if _, err := gate.Append(c); err != nil {
				t.Fatal(err)
			}
			if got := fileEntries(t, path); !slices.Equal(got, []Entry{a, b, c}) {
				t.Fatalf("torn at %d: %d entries after recovery", cut, len(got))
			}
		})
	}
}

// Red team (rtnonce), held: lists written by hand or older versions, with
// CRLF line ends, trailing blanks and tabs, or "]" with no newline:
// File.Append keeps every entry and the result reads.
// (Was TestRedteamAppendToHandWrittenLists.)
func TestFileAppendToHandWrittenLists(t *testing.T) {
	k := testKey(t, 1)
	a, b := testEntry(t, k, testID("a"), ScopeChain), testEntry(t, k, testID("b"), ScopeChain)
	ja := string(must(entryJSON(a)))
	for name, body := range map[string]string{
		"crlf":     "[\r\n  " + ja + "\r\n]\r\n",
		"trailing": "[" + ja + " \t \n ]  \n\n\t ",
		"nonl":     "[" + ja + "]",
		"longtail": "[" + ja + strings.Repeat(" ", 2000) + "]" + strings.Repeat("\n", 500),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "l.json")
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			f := openFile(t, path)
			if added, err := f.Append(b); err != nil || !added {
				t.Fatalf("%v %v", added, err)
			}
			if got := fileEntries(t, path); !slices.Equal(got, []Entry{a, b}) {
				t.Fatalf("%d entries", len(got))
			}
			data, _ := os.ReadFile(path)
			if !bytes.HasPrefix(data, []byte(body[:listHead([]byte(body))])) {
				t.Fatal("the head changed")
			}
		})
	}
}

// Red team (rtnonce), held: readers (a gate's File, and fresh Loads)
// racing 3 writers (two Files' Append and the path Append, as a push, a
// second server and `delegateos revoke`) never see an old revocation go
// missing: each look either holds it or fails closed.
// (Was TestRedteamReadersDuringConcurrentAppends.)
func TestFileAppendReadersNeverMissAnEntry(t *testing.T) {
	k := testKey(t, 1)
	a := testEntry(t, k, testID("a"), ScopeChain)
	path, gate := newListFile(t, a)
	w1, w2 := openFile(t, path), openFile(t, path)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				e := testEntry(t, k, testID(fmt.Sprint(w, "-", i)), ScopeBlock)
				var err error
				switch w {
				case 0:
					_, err = w1.Append(e)
				case 1:
					_, err = w2.Append(e)
				default:
					err = Append(path, e)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	looks, closed := 0, 0
	for {
		select {
		case <-done:
			if got := fileEntries(t, path); len(got) != 91 {
				t.Fatalf("%d entries, want 91", len(got))
			}
			t.Logf("%d looks, %d failed closed", looks, closed)
			return
		default:
		}
		looks++
		_, revoked, err := gate.Revoked([]string{a.RevocationID}, []string{a.RevokedBy})
		if err == nil && !revoked {
			t.Fatal("the gate took a revoked token during an append")
		}
		if err != nil {
			if closed == 0 || closed%50 == 0 {
				t.Logf("look %d: %v", looks, err)
			}
			closed++
		}
		if l, err := Load(path); err == nil && !l.IsRevoked(a.RevocationID) {
			t.Fatal("a fresh reader lost the old revocation during an append")
		}
	}
}
