package audit

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/delegateos/delegateos/receipt"
)

// FuzzVerify: Verify never panics on any log, and a log it accepts has
// every line a receipt at the position the line gives it.
func FuzzVerify(f *testing.F) {
	lines := writeLog(f, filepath.Join(f.TempDir(), "audit.log"), 3, testOptions)
	f.Add(join(lines))
	f.Add(join(lines[:len(lines)-1]))
	f.Add(append([]byte(`{"receipt":2,"schema_version":"audit_export/1"}`+"\n"), join(lines[1:])...))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := Verify(bytes.NewReader(data), VerifyOptions{Open: true})
		if err != nil {
			return
		}
		n := int64(0)
		if rerr := Read(bytes.NewReader(data), func(line int64, r *receipt.Receipt) error {
			if r.Position().Seq != rep.First+n {
				t.Fatalf("line %d holds entry %d", line, r.Position().Seq)
			}
			n++
			return nil
		}); rerr != nil {
			t.Fatalf("verified but unreadable: %v", rerr)
		}
		if n != rep.Entries {
			t.Fatalf("%d entries read, %d verified", n, rep.Entries)
		}
	})
}
