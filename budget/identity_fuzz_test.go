package budget

import (
	"strings"
	"testing"
)

// FuzzIdentity: the identity hash is read from a Redis anyone with access
// to it can write; what does not read as one delegateos writes is an
// error, never an identity without an ID or with a generation that is not
// positive.
func FuzzIdentity(f *testing.F) {
	f.Add("0123abcd", "1795926107806", "proxy", "")
	f.Add("", "1", "operator", "flushed")
	f.Add("x", "-5", "", "")
	f.Add("x", "9223372036854775808", "", "")
	f.Fuzz(func(t *testing.T, id, g, by, reset string) {
		got, err := identityOf(map[string]string{"id": id, "g": g, "by": by, "reset": reset})
		if err != nil {
			return
		}
		if got.ID == "" || got.Gen <= 0 || got.ID != id || got.By != by || got.Reset != reset {
			t.Fatalf("%q %q read as %+v", id, g, got)
		}
	})
}

// FuzzJournal: a journal of unsent commits is replayed only with the keys
// the scripts own, in the order they take them.
func FuzzJournal(f *testing.F) {
	f.Add(`[{"keys":["delegateos:spend:{I}:I/1:a","delegateos:open:{I}","delegateos:void:{I}:n.1"],"rid":"n.1","cost":5,"actual":0,"void":true}]`)
	f.Add(`[{"keys":["other","delegateos:open:{I}","delegateos:void:{I}:n.1"],"rid":"n.1","cost":5,"actual":0}]`)
	f.Add(`[{"keys":[],"rid":"","cost":-1}]`)
	f.Add("{\"keys\":[\"delegateos:spend:{I}:I/1:a\",\"delegateos:open:{I}\",\"delegateos:void:{I}:n.1\"],\"rid\":\"n.1\",\"cost\":5}\n{\"keys\":[\"x\"")
	f.Fuzz(func(t *testing.T, data string) {
		for _, c := range readJournal([]byte(data)) {
			if !c.valid() {
				continue
			}
			n := len(c.Keys)
			if n < 3 || c.RID == "" || c.Cost < 0 || c.Actual < 0 ||
				!strings.HasPrefix(c.Keys[n-2], openKeyPrefix) || !strings.HasPrefix(c.Keys[n-1], voidKeyPrefix) {
				t.Fatalf("%+v accepted", c)
			}
			for _, k := range c.Keys[:n-2] {
				if !strings.HasPrefix(k, spendKeyPrefix) || tagOf(k) != tagOf(c.Keys[n-2]) {
					t.Fatalf("%+v accepted with key %q", c, k)
				}
			}
		}
	})
}
