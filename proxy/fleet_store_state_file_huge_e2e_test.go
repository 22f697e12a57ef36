//go:build unix

package proxy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Red team 7 (rtstore7), RT7-6: a state file that is huge. readStateFile
// (machine-id, the index, counts files, machine-instances) and
// openRecord (live records) allocate the file's whole size from fstat
// before reading: a machine-id that is a sparse 8 TiB file (a corrupt
// filesystem, `truncate -s`, a mistaken restore) makes the start die
// with the runtime's "fatal error: runtime: out of memory" (a Go fatal
// error, not a refusal naming the file); a smaller one (a few GiB,
// sparse) is read whole into memory — the OOM killer, or a proxy that
// takes GiBs at each start and each epoch re-read of a counts file.
// Only this user can plant it (0700 directory); the defect is that a
// corrupt state file crashes instead of refusing, naming it, as the
// docs promise ("cut, corrupt … stops the proxy at start, naming it").
// (8 TiB is past this machine's RAM + swap: the allocation is refused
// at once under the kernel's overcommit heuristic, no memory touched.)
//
// Broke before (the start crashed with a runtime fatal error); held:
// readStateFile and openRecord refuse a file over maxStateFile (256 MiB),
// naming it, before allocating its size.
func TestE2EFaultHugeMachineIDRefused(t *testing.T) {
	f := newStoreFleet(t)
	p, s := f.start(f.a, "", nil)
	if n, typ, detail := drain(t, s, 1); n != 1 {
		t.Fatalf("the first call: %s: %s", typ, detail)
	}
	stopProxy(t, p)
	id := filepath.Join(f.e.Dir, "state", "machine-id")
	if err := os.Truncate(id, 1<<43); err != nil {
		t.Fatal(err)
	}
	defer os.Truncate(id, 0)
	stderr := f.startRefused("with an 8 TiB machine-id")
	if strings.Contains(stderr, "fatal error") || !strings.Contains(stderr, "machine-id") {
		i := strings.Index(stderr, "fatal error")
		t.Errorf("a proxy started on an 8 TiB (sparse) machine-id: want a refusal naming it; got %q", stderr[max(0, i):min(len(stderr), max(0, i)+200)])
	}
}
