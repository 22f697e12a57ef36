package budget

import (
	"bytes"
	"maps"
	"reflect"
	"testing"
)

// FuzzParseLog: parsing a log never panics; a log that parses, written
// back line by line, parses to the same lines and replays to the same
// spend, and its compacted form to the same spend and calls.
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
		if !maps.Equal(compacted.spent, spent.spent) || !maps.Equal(compacted.calls, spent.calls) {
			t.Fatalf("compacted, replays to %v and %v, want %v and %v", compacted.spent, compacted.calls, spent.spent, spent.calls)
		}
	})
}

// FuzzReadUsage: reading usage never panics, and a log it reads is one
// OpenFile reads too, with each key's committed spend and held cost adding
// up to the key's spend, every key with a spend reported, and no figure
// below zero.
func FuzzReadUsage(f *testing.F) {
	for _, seed := range []string{
		"",
		`{"op":"total","delta":100,"keys":["root"],"limits":[500],"calls":3,"at":1767225600000}` + "\n" +
			`{"op":"reserve","id":1,"delta":30,"keys":["root","root/a"],"limits":[500,100],"at":1767225601000}` + "\n" +
			`{"op":"commit","id":1,"delta":-10,"keys":["root","root/a"]}` + "\n" +
			`{"op":"reserve","id":2,"delta":0,"keys":["root"],"limits":[500],"at":1767225602000}` + "\n" +
			`{"op":"reserve","id":3,"delta":5,"keys":["root"]}` + "\n" +
			`{"op":"release","id":3,"delta":-5,"keys":["root"]}` + "\n" +
			`{"op":"reserve","id":4,"del`,
		`{"op":"total","delta":10,"keys":["k"]}` + "\n" + `{"op":"release","id":3,"delta":-10,"keys":["k"]}` + "\n",
		`{"op":"reserve","id":1,"delta":9223372036854775807,"keys":["a"]}` + "\n" + `{"op":"reserve","id":2,"delta":1,"keys":["a"]}` + "\n",
		`{"op":"reserve","id":1,"delta":5,"keys":["a"]}` + "\n" + `{"op":"commit","id":1,"delta":9223372036854775807,"keys":["a"]}` + "\n",
		`{"op":"reserve","id":1,"delta":5,"keys":["a","b"],"limits":[9,7],"at":1}` + "\n" + `{"op":"commit","id":1,"delta":0,"keys":["a","b"]}` + "\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		us, err := readUsage(bytes.NewReader(data))
		if err != nil {
			return
		}
		var l ledger
		if _, err := parseLog(data, l.replay); err != nil {
			t.Fatalf("ReadUsage read a log OpenFile refuses (%v): %+v", err, us)
		}
		seen := map[string]bool{}
		for _, u := range us {
			seen[u.Key] = true
			if u.Committed < 0 || u.Reserved < 0 || u.Calls < 0 || u.Limit < 0 || u.Recorded != (u.Calls > 0) {
				t.Fatalf("%+v", u)
			}
			if s := l.spent[u.Key]; u.Committed+u.Reserved != s {
				t.Fatalf("%s: %d committed and %d held, but OpenFile finds %d spent", u.Key, u.Committed, u.Reserved, s)
			}
			if c := l.calls[u.Key]; c.calls != u.Calls || c.limit != u.Limit || (u.Recorded && c.last != u.LastCall.UnixMilli()) {
				t.Fatalf("%s: %+v, but OpenFile finds %+v", u.Key, u, c)
			}
		}
		for k := range l.spent {
			if !seen[k] {
				t.Fatalf("%s has a spend of %d but is not reported", k, l.spent[k])
			}
		}
	})
}
