package budget

import (
	"bytes"
	"maps"
	"reflect"
	"testing"
)

// FuzzParseLog: parsing a log never panics; a log that parses, written
// back line by line, parses to the same lines and replays to the same
// spend, and so does its compacted form.
func FuzzParseLog(f *testing.F) {
	for _, seed := range []string{
		"",
		`{"op":"total","delta":100,"keys":["root"]}` + "\n",
		`{"op":"total","delta":100,"keys":["root"]}` + "\n" +
			`{"op":"reserve","id":1,"delta":30,"keys":["root","root/a"]}` + "\n" +
			`{"op":"commit","id":1,"delta":-10,"keys":["root","root/a"]}` + "\n" +
			`{"op":"reserve","id":2,"delta":5,"keys":["root"]}` + "\n" +
			`{"op":"release","id":2,"delta":-5,"keys":["root"]}` + "\n" +
			`{"op":"reserve","id":3,"del`,
		`{"op":"reserve","id":1,"delta":1,"keys":["\u00e9\n\"\\","\ud834\udd1e"]}` + "\n",
		` { "keys" : [ "a" ] , "delta" : 1 , "op" : "total" } ` + "\n",
		`{"op":"release","id":2,"delta":-5,"keys":["root"]}` + "\n",
		`{"op":"total","delta":9223372036854775807,"keys":["a"]}` + "\n" + `{"op":"commit","id":1,"delta":5,"keys":["a"]}` + "\n",
		"\n\n",
		"\x00\x00\x00",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var entries []entry
		var spent ledger
		n, err := parseLog(data, func(e entry) error {
			entries = append(entries, e)
			return nil
		})
		if n > len(data) || (err == nil && bytes.IndexByte(data[n:], '\n') >= 0) {
			t.Fatalf("read %d of %d bytes, err %v", n, len(data), err)
		}
		if err != nil {
			return
		}
		_, replayErr := parseLog(data, spent.replay)

		var out []byte
		for _, e := range entries {
			out = appendEntry(out, e)
		}
		var back []entry
		var spentBack ledger
		m, err := parseLog(out, func(e entry) error {
			back = append(back, e)
			return spentBack.replay(e)
		})
		if (err == nil) != (replayErr == nil) || m > len(out) {
			t.Fatalf("written back:\n%s\nreplays with %v; the original with %v", out, err, replayErr)
		}
		if replayErr != nil {
			return
		}
		if m != len(out) || !reflect.DeepEqual(back, entries) {
			t.Fatalf("written back:\n%s\nparses to %+v, want %+v", out, back, entries)
		}
		if !maps.Equal(spentBack.spent, spent.spent) {
			t.Fatalf("written back, replays to %v, want %v", spentBack.spent, spent.spent)
		}
		var compacted ledger
		if _, err := parseLog(spent.appendTotals(nil), compacted.replay); err != nil {
			t.Fatalf("compacted form: %v", err)
		}
		if !maps.Equal(compacted.spent, spent.spent) {
			t.Fatalf("compacted, replays to %v, want %v", compacted.spent, spent.spent)
		}
	})
}
