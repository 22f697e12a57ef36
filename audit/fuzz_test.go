package audit

import (
	"bytes"
	"os"
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
	// A log continued after a kill: a recovery checkpoint, and the same
	// with its flag flipped.
	path := filepath.Join(f.TempDir(), "recovered.log")
	if err := os.WriteFile(path, join(lines[:len(lines)-1]), 0o600); err != nil {
		f.Fatal(err)
	}
	recovered := join(writeLog(f, path, 1, testOptions))
	f.Add(recovered)
	f.Add(bytes.Replace(recovered, []byte(`"recovered":true`), []byte(`"recovered":false`), 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := Verify(bytes.NewReader(data), VerifyOptions{Open: true, AllowRecovered: true})
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
