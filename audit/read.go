package audit

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

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

// ExportAVP returns receipt n of the log at path alone, signed on its own
// (an AVP receipt), once the log verifies and a checkpoint covers it. A
// receipt written with its own proof is returned as it is in the log; one
// the log signs only by its checkpoints is signed now by signer, which
// must be the key that signed the log (nil refuses it).
func ExportAVP(path string, n int64, o VerifyOptions, signer *receipt.Signer) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	o.Open, o.AllowRecovered = true, true
	rep, err := Verify(f, o)
	f.Close()
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
	line, err := readEntry(path, n)
	if err != nil {
		return nil, err
	}
	rc, err := receipt.ParseEntry(line)
	if err != nil || rc.Position().Seq != n {
		return nil, fmt.Errorf("%s changed while it was exported", path)
	}
	if rc.Signed() {
		return append(line, '\n'), nil
	}
	if signer == nil {
		return nil, fmt.Errorf("receipt %d has no proof of its own (the log's checkpoints sign it): give the proxy key (--key FILE, or --policy with its proxy_key) to sign it on its own, or prove it with 'audit prove'", n)
	}
	if !slices.Contains(rep.Signers, signer.DID()) {
		return nil, fmt.Errorf("the key %s did not sign this log (%s did): it cannot sign its receipts", signer.DID(), strings.Join(rep.Signers, ", "))
	}
	out, err := signer.Sign(rc.Body)
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
