package audit

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/delegateos/delegateos/receipt"
)

// Read parses each entry of a log in turn (strictly, without checking
// signatures or the chain: Verify does) and passes it to fn.
func Read(r io.Reader, fn func(line int64, rc *receipt.Receipt) error) error {
	lr := newLineReader(r)
	for {
		l := lr.line()
		if l == nil {
			return lr.err
		}
		if l.tooLong {
			return fmt.Errorf("line %d is longer than %d bytes", l.no, MaxLineBytes)
		}
		if l.no == 1 && bytes.Contains(l.text, []byte(`"schema_version":"`+ExportKind+`"`)) {
			if _, err := parseExportHeader(l); err != nil {
				return err
			}
			continue
		}
		rc, err := receipt.ParseEntry(l.text)
		if err != nil {
			return fmt.Errorf("line %d: %v", l.no, err)
		}
		if err := fn(l.no, rc); err != nil {
			return err
		}
	}
}

// Export returns receipt n of the log at path with the entries that prove
// its place: the entries from it to the first checkpoint at or after it,
// after a header line. The log is verified first (as Open: a proxy may
// still be writing it), up to its end.
func Export(path string, n int64, o VerifyOptions) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// A receipt before or after a recovery is proven all the same; the
	// export's own verify reports a recovery checkpoint in it.
	o.Open, o.AllowRecovered = true, true
	rep, err := Verify(f, o)
	if err != nil {
		return nil, fmt.Errorf("%s does not verify, so nothing is exported from it: %w", path, err)
	}
	if rep.Export {
		return nil, fmt.Errorf("%s is already an export", path)
	}
	if n < 1 || n > rep.Last {
		return nil, fmt.Errorf("the log has entries 1 to %d: there is no entry %d", rep.Last, n)
	}
	if n > rep.LastCheckpoint {
		return nil, fmt.Errorf("entry %d is not yet covered by a checkpoint (the last is entry %d): export it once the proxy has written the next one", n, rep.LastCheckpoint)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	out := fmt.Appendf(nil, `{"receipt":%d,"schema_version":"%s"}`+"\n", n, ExportKind)
	lr := newLineReader(f)
	for {
		l := lr.line()
		if l == nil {
			if lr.err != nil {
				return nil, lr.err
			}
			return nil, fmt.Errorf("%s changed while it was exported", path)
		}
		if l.no < n {
			continue
		}
		out = append(append(out, l.text...), '\n')
		rc, err := receipt.ParseEntry(l.text)
		if err != nil {
			return nil, fmt.Errorf("%s changed while it was exported", path)
		}
		if _, ok := rc.Body.(*receipt.CheckpointBody); ok {
			break
		}
	}
	if _, err := Verify(bytes.NewReader(out), o); err != nil {
		return nil, fmt.Errorf("%s changed while it was exported: %w", path, err)
	}
	return out, nil
}
