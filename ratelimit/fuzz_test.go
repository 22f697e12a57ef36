package ratelimit

import (
	"bytes"
	"reflect"
	"testing"
	"time"
)

// FuzzParseLog: parsing a file never panics; a file that parses, written
// back line by line, parses to the same lines, and it loads into logs
// whose rewrite loads into the same logs.
func FuzzParseLog(f *testing.F) {
	for _, seed := range []string{
		"",
		`{"at":[1700000000000000000],"keys":[["p","d"]]}` + "\n",
		`{"at":[1700000000000000000,1700000000500000000],"keys":[["p","r"],["p","r/9:del_a"],["tools:w*","r"]]}` + "\n" +
			`{"op":"release","at":[1700000000500000000],"keys":[["p","r"]]}` + "\n" +
			`{"at":[17000`,
		`{"at":[1],"keys":[["\u00e9\n\"\\","\ud834\udd1e"]]}` + "\n",
		` { "keys" : [ [ "p" , "d" ] ] , "at" : [ 5 ] } ` + "\n",
		`{"op":"release","at":[9223372036854775807],"keys":[["p","d"]]}` + "\n",
		"\n\n",
		"\x00\x00\x00",
	} {
		f.Add([]byte(seed))
	}
	limits := map[string]Limit{"p": {N: 2, Per: time.Second}, "tools:w*": {N: 3, Per: time.Hour}}
	now := time.Unix(1_700_000_000, 200_000_000)
	f.Fuzz(func(t *testing.T, data []byte) {
		var entries []entry
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
		var out []byte
		for _, e := range entries {
			out = appendEntry(out, e)
		}
		var back []entry
		if m, err := parseLog(out, func(e entry) error {
			back = append(back, e)
			return nil
		}); err != nil || m != len(out) || !reflect.DeepEqual(back, entries) {
			t.Fatalf("written back:\n%s\nparses to %+v, %v; want %+v", out, back, err, entries)
		}
		l, _ := New(limits)
		if _, err := parseLog(data, l.replay); err != nil {
			t.Fatal(err)
		}
		l.settle(l.nanos(now))
		again, _ := New(limits)
		if _, err := parseLog(l.appendLogs(nil), again.replay); err != nil {
			t.Fatalf("the rewrite does not parse: %v", err)
		}
		again.settle(again.nanos(now))
		if !sameLogs(l, again) {
			t.Fatalf("the rewrite of\n%s\nloads differently:\n%s", data, l.appendLogs(nil))
		}
	})
}

func sameLogs(a, b *Limiter) bool {
	if len(a.windows) != len(b.windows) {
		return false
	}
	for k, w := range a.windows {
		if v := b.windows[k]; v == nil || !reflect.DeepEqual(w.times, v.times) {
			return false
		}
	}
	return true
}
