package revocation

import (
	"bytes"
	"crypto/sha256"
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
// path+".append": then the offset the entry is written at, the length of
// the file before, the device and inode numbers of the file, the SHA-256
// of its bytes before that offset (which the append leaves as they are),
// and the bytes from that offset to the end, in hex. (Records of the
// first version, "delegateos-revocation-append ", did not say which list
// they belong to, and are refused.)
const appendRecord = "delegateos-revocation-append2 "

// maxRecordSize bounds what a writer reads of a record: the bytes it
// saves are at most a list's.
const maxRecordSize = 2*MaxListSize + 256

// formatRecord is the record of an append at head to the file fi of size
// bytes, whose bytes before head hash to sum and after it are old.
func formatRecord(head, size int64, fi fs.FileInfo, sum []byte, old []byte) string {
	dev, ino, _, _ := fsutil.ID(fi)
	return fmt.Sprintf("%s%d %d %d %d %x %x\n", appendRecord, head, size, dev, ino, sum, old)
}

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
	list, err := os.OpenFile(path, os.O_RDWR|fsutil.ONoFollow, 0)
	if err != nil {
		return fmt.Errorf("write revocation list %s: %w", path, err)
	}
	defer list.Close()
	fi, err := list.Stat()
	if err != nil || fi.Size() != size {
		return fmt.Errorf("revocation list %s changed while being appended to (by a writer that does not take %s.lock?); retry", path, path)
	}
	old := make([]byte, size-int64(head))
	if _, err := list.ReadAt(old, int64(head)); err != nil {
		return fmt.Errorf("read revocation list %s: %w", path, err)
	}
	if int64(head)+int64(len(tail)) > MaxListSize {
		return fmt.Errorf("revocation list %s would be over the limit of %d bytes", path, MaxListSize)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(list, 0, int64(head))); err != nil {
		return fmt.Errorf("read revocation list %s: %w", path, err)
	}
	if err := writeRecord(path, formatRecord(int64(head), size, fi, h.Sum(nil), old), true); err != nil {
		return err
	}
	if _, err = list.WriteAt(tail, int64(head)); err == nil {
		if err = list.Truncate(int64(head + len(tail))); err == nil {
			err = list.Sync()
		}
	}
	if err != nil {
		// Put the list back at once (a full disk, an I/O error), so that
		// readers do not refuse every token until the next writer.
		if _, uerr := list.WriteAt(old, int64(head)); uerr == nil {
			if uerr = list.Truncate(size); uerr == nil && list.Sync() == nil {
				_ = writeRecord(path, "", true)
			}
		}
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
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|fsutil.ONoFollow, listFileMode)
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
//
// Only a record that proves it is this list's is acted on: not a symbolic
// link, owned by the list's owner or this process's user, naming the
// list's device and inode and the hash of its bytes before the offset,
// saving only what follows a list's last entry (blanks and the closing
// bracket), and such that the list it puts back parses. Any other record
// (planted beside the list, copied from another host, left when the list
// was restored from a backup) stops the writer with an error naming it;
// no entry is ever cut on its word.
func recoverAppend(path string) error {
	rec, recInfo, err := readRecord(path + ".append")
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(rec) == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("revocation list %s: record of the append: %w", path, err)
	}
	refuse := func(why string) error {
		return fmt.Errorf("revocation list %s: %s.append %s; not writing to the list: check it, then remove %s.append", path, path, why, path)
	}
	r, ok := parseRecord(string(rec))
	if !ok {
		return refuse("holds no record of an append")
	}
	list, err := os.OpenFile(path, os.O_RDWR|fsutil.ONoFollow, 0)
	if err != nil {
		return fmt.Errorf("revocation list %s: %w", path, err)
	}
	defer list.Close()
	fi, err := list.Stat()
	if err != nil {
		return fmt.Errorf("revocation list %s: %w", path, err)
	}
	if dev, ino, uid, ok := fsutil.ID(fi); ok {
		_, _, recUID, _ := fsutil.ID(recInfo)
		if recUID != uid && int64(recUID) != int64(os.Geteuid()) {
			return refuse(fmt.Sprintf("is owned by user %d, neither the list's owner (%d) nor this process's user", recUID, uid))
		}
		if dev != r.dev || ino != r.ino {
			return refuse("records an append to another file (device and inode differ)")
		}
	}
	if !fi.Mode().IsRegular() || fi.Size() > MaxListSize || fi.Size() < r.head {
		return refuse(fmt.Sprintf("records an append at byte %d; the list is %d bytes", r.head, fi.Size()))
	}
	data, err := io.ReadAll(io.NewSectionReader(list, 0, fi.Size()))
	if err != nil {
		return fmt.Errorf("revocation list %s: %w", path, err)
	}
	if sum := sha256.Sum256(data[:r.head]); !bytes.Equal(sum[:], r.sum) {
		return refuse(fmt.Sprintf("records an append to a list whose first %d bytes were not these", r.head))
	}
	if !bytes.Equal(bytes.Trim(r.old, jsonSpace), []byte("]")) {
		return refuse("saves bytes an append does not replace (only blanks and the closing bracket follow a list's last entry)")
	}
	tail := data[r.head:]
	if !wholeAppend(tail) && !bytes.Equal(tail, r.old) {
		restored := append(data[:r.head:r.head], r.old...)
		if _, err := ParseList(restored); err != nil {
			return refuse(fmt.Sprintf("would put back a list that does not read (%v)", err))
		}
		if _, err = list.WriteAt(r.old, r.head); err == nil {
			if err = list.Truncate(r.size); err == nil {
				err = list.Sync()
			}
		}
		if err != nil {
			return fmt.Errorf("revocation list %s: undoing an interrupted append: %w", path, err)
		}
	}
	return writeRecord(path, "", true)
}

// readRecord reads the record file name, not following a symbolic link
// nor waiting on a FIFO, and describes what it read.
func readRecord(name string) ([]byte, fs.FileInfo, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|fsutil.ONoFollow|fsutil.ONonBlock, 0)
	if err != nil {
		if fi, lerr := os.Lstat(name); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, nil, fmt.Errorf("%s is a symbolic link; check the list, then remove it", name)
		}
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s is not a regular file; check the list, then remove it", name)
	}
	rec, err := io.ReadAll(io.LimitReader(f, maxRecordSize))
	return rec, fi, err
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
	if rec, _, err := readRecord(path + ".append"); err != nil || len(rec) == 0 {
		return false
	}
	unlock, err := lockForWrite(path)
	if err != nil {
		return false
	}
	defer unlock()
	return recoverAppend(path) == nil
}

// record is a parsed record of appendInPlace.
type record struct {
	head, size int64
	dev, ino   uint64
	sum, old   []byte
}

// parseRecord reads a record of appendInPlace.
func parseRecord(rec string) (r record, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSuffix(rec, "\n"), appendRecord)
	fields := strings.Split(rest, " ")
	if !found || len(fields) != 6 {
		return record{}, false
	}
	var errs [6]error
	r.head, errs[0] = strconv.ParseInt(fields[0], 10, 64)
	r.size, errs[1] = strconv.ParseInt(fields[1], 10, 64)
	r.dev, errs[2] = strconv.ParseUint(fields[2], 10, 64)
	r.ino, errs[3] = strconv.ParseUint(fields[3], 10, 64)
	r.sum, errs[4] = hex.DecodeString(fields[4])
	r.old, errs[5] = hex.DecodeString(fields[5])
	if errors.Join(errs[:]...) != nil || r.head < 1 || len(r.sum) != sha256.Size || r.size != r.head+int64(len(r.old)) {
		return record{}, false
	}
	return r, true
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
