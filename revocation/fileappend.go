package revocation

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/delegateos/delegateos/internal/fsutil"
)

// Append verifies e and appends it to the list file f reads, unless the
// list holds an entry by e's revoker for e's block already; it reports
// whether it did. Its cost is that of the entry, not of the list: the
// entries already in the file were verified when f read them and are not
// parsed or verified again, and the file is not rewritten. Under the
// writers' lock (path+".lock", as the package's Append takes it), f looks
// at the file as Revoked does (re-reading only what another process
// appended), then writes the entry in place of the closing bracket,
// followed by a new one, and syncs the file before it returns. An
// interrupted append (a crash between the write and the sync) is undone
// by the next writer: before writing, each records the bytes it replaces
// in path+".append" (synced), and a writer that finds a record whose
// append the file does not hold whole puts those bytes back. Entries keep
// the order in which they were appended; concurrent appends from any
// number of goroutines or processes all land.
//
// A reader that reads the file while an entry is being written may see a
// list that does not parse, and refuses every token until it looks again
// (at once: the file's change time is that recent).
func (f *File) Append(e Entry) (added bool, err error) {
	if err := e.Verify(); err != nil {
		return false, err
	}
	path := f.path.Path()
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	unlock, err := lockForWrite(path)
	if err != nil {
		return false, err
	}
	defer unlock()
	if err := recoverAppend(path); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false, f.state.Load().err
	}
	st := f.check()
	if st.err != nil {
		return false, fmt.Errorf("%w; not appending to it", st.err)
	}
	if st.list.revokedBy(e.RevocationID, e.RevokedBy) {
		return false, nil
	}
	if st.head == 0 {
		// An empty list: nothing to keep, so write it whole.
		l := NewList()
		l.add(e)
		out, err := l.fileBytes()
		if err != nil {
			return false, err
		}
		// A list with several names (a hard link; a file bind-mounted
		// into a container) is written in place, as Append does: a
		// rename would leave every other name on the old, empty list.
		mode := listFileMode
		fi, err := os.Stat(path)
		if err == nil {
			mode = fi.Mode().Perm()
		}
		if err == nil && fsutil.Links(fi) > 1 {
			err = rewriteInPlace(path, out)
		} else {
			err = writeFileAtomic(path, out, mode)
		}
		if err != nil {
			return false, err
		}
	} else if err := appendInPlace(path, st.head, st.stamp.Size(), e); err != nil {
		return false, err
	}
	if st := f.reload(); st.err != nil {
		return true, st.err
	}
	return true, nil
}

// lockForWrite takes the writers' lock of the list file at path (a path
// with no symbolic link in it) and, for a list with several names, a lock
// on the file itself, which every name shares.
func lockForWrite(path string) (unlock func(), err error) {
	unlockName, err := fsutil.Lock(path+".lock", listFileMode)
	if err != nil {
		return nil, fmt.Errorf("lock revocation list %s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fsutil.Links(fi) <= 1 {
		return unlockName, nil
	}
	unlockFile, err := fsutil.Lock(path, fi.Mode().Perm())
	if err != nil {
		unlockName()
		return nil, fmt.Errorf("lock revocation list %s: %w", path, err)
	}
	return func() { unlockFile(); unlockName() }, nil
}

// appendRecord begins the record of an append in progress, in
// path+".append": then the offset the entry is written at, the length
// of the file before, and the bytes from that offset to the end, in hex.
const appendRecord = "delegateos-revocation-append "

// appendInPlace writes e at head, the end of the list's last entry in
// the file of size bytes, after recording what it replaces.
func appendInPlace(path string, head int, size int64, e Entry) error {
	entry, err := entryJSON(e)
	if err != nil {
		return err
	}
	tail := make([]byte, 0, len(entry)+8)
	tail = append(tail, ",\n  "...)
	tail = append(tail, entry...)
	tail = append(tail, "\n]\n"...)
	list, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("write revocation list %s: %w", path, err)
	}
	defer list.Close()
	if fi, err := list.Stat(); err != nil || fi.Size() != size {
		return fmt.Errorf("revocation list %s changed while being appended to (by a writer that does not take %s.lock?); retry", path, path)
	}
	old := make([]byte, size-int64(head))
	if _, err := list.ReadAt(old, int64(head)); err != nil {
		return fmt.Errorf("read revocation list %s: %w", path, err)
	}
	if int64(head)+int64(len(tail)) > MaxListSize {
		return fmt.Errorf("revocation list %s would be over the limit of %d bytes", path, MaxListSize)
	}
	if err := writeRecord(path, fmt.Sprintf("%s%d %d %s\n", appendRecord, head, size, hex.EncodeToString(old)), true); err != nil {
		return err
	}
	if _, err = list.WriteAt(tail, int64(head)); err == nil {
		if err = list.Truncate(int64(head + len(tail))); err == nil {
			err = list.Sync()
		}
	}
	if err != nil {
		return fmt.Errorf("write revocation list %s: %w", path, err)
	}
	// Not synced: a record that outlives a crash finds the append whole,
	// and is then cleared.
	return writeRecord(path, "", false)
}

// entryJSON is e as the list file holds it, on one line.
func entryJSON(e Entry) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// writeRecord replaces the content of path+".append" with rec and, when
// sync is set, syncs it (and, when it creates the file, its directory).
func writeRecord(path, rec string, sync bool) error {
	name := path + ".append"
	_, statErr := os.Lstat(name)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, listFileMode)
	if err != nil {
		return fmt.Errorf("revocation list %s: record of the append: %w", path, err)
	}
	defer f.Close()
	if err = f.Truncate(0); err == nil {
		if _, err = f.WriteAt([]byte(rec), 0); err == nil && sync {
			err = f.Sync()
		}
	}
	if err == nil && sync && errors.Is(statErr, fs.ErrNotExist) {
		err = fsutil.SyncDir(filepath.Dir(name))
	}
	if err != nil {
		return fmt.Errorf("revocation list %s: record of the append: %w", path, err)
	}
	return nil
}

// recoverAppend undoes an append that was interrupted, as path+".append"
// records it: unless the file holds, from the recorded offset, a comma,
// entries that parse and verify and the closing bracket, the bytes the
// append replaced are put back. The caller holds the writers' lock.
func recoverAppend(path string) error {
	rec, err := os.ReadFile(path + ".append")
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(rec) == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("revocation list %s: record of the append: %w", path, err)
	}
	head, size, old, ok := parseRecord(string(rec))
	if !ok {
		return fmt.Errorf("revocation list %s: %s.append holds no record of an append; check the list, then remove it", path, path)
	}
	list, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("revocation list %s: %w", path, err)
	}
	defer list.Close()
	fi, err := list.Stat()
	if err != nil {
		return fmt.Errorf("revocation list %s: %w", path, err)
	}
	if fi.Size() > MaxListSize || fi.Size() < head {
		return fmt.Errorf("revocation list %s is %d bytes, not the list an append was interrupted in (%d bytes before it); check the list, then remove %s.append", path, fi.Size(), size, path)
	}
	tail, err := io.ReadAll(io.NewSectionReader(list, head, fi.Size()-head))
	if err != nil {
		return fmt.Errorf("revocation list %s: %w", path, err)
	}
	if !wholeAppend(tail) {
		if _, err = list.WriteAt(old, head); err == nil {
			if err = list.Truncate(size); err == nil {
				err = list.Sync()
			}
		}
		if err != nil {
			return fmt.Errorf("revocation list %s: undoing an interrupted append: %w", path, err)
		}
	}
	return writeRecord(path, "", true)
}

// undoInterruptedAppend runs recoverAppend, under the writers' lock, for
// a list file that does not read when a record of an append is beside it:
// a process that opens the list after a crash cut an append short reads
// the list as it was. It reports whether it ran; a process that cannot
// take the lock or write the file (a reader without the rights) leaves
// the list to the next writer, and refuses every token meanwhile.
func undoInterruptedAppend(path string) bool {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	if rec, err := os.ReadFile(path + ".append"); err != nil || len(rec) == 0 {
		return false
	}
	unlock, err := lockForWrite(path)
	if err != nil {
		return false
	}
	defer unlock()
	return recoverAppend(path) == nil
}

// parseRecord reads a record of appendInPlace.
func parseRecord(rec string) (head, size int64, old []byte, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSuffix(rec, "\n"), appendRecord)
	fields := strings.Fields(rest)
	if !found || len(fields) < 2 || len(fields) > 3 {
		return 0, 0, nil, false
	}
	head, err1 := strconv.ParseInt(fields[0], 10, 64)
	size, err2 := strconv.ParseInt(fields[1], 10, 64)
	if len(fields) == 3 {
		var err error
		if old, err = hex.DecodeString(fields[2]); err != nil {
			return 0, 0, nil, false
		}
	}
	if err1 != nil || err2 != nil || head < 1 || size != head+int64(len(old)) {
		return 0, 0, nil, false
	}
	return head, size, old, true
}

// wholeAppend reports whether tail, the bytes of a list file from the end
// of what was its last entry, is what an append leaves: a comma, then
// entries that parse and verify, then the closing bracket.
func wholeAppend(tail []byte) bool {
	t := bytes.TrimLeft(tail, jsonSpace)
	if len(t) == 0 || t[0] != ',' {
		return false
	}
	l, err := parseList(append([]byte{'['}, t[1:]...), nil)
	return err == nil && l.Len() > 0
}
