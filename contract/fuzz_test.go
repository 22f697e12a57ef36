package contract

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzParse: Parse never panics, and a contract that parses is written by
// Marshal in a form that parses back to the same contract (and the same
// bytes); verifying it gives the same answer before and after.
func FuzzParse(f *testing.F) {
	c := testContract(f)
	good := mustMarshal(f, c)
	f.Add(good)
	f.Add(indent(f, good))
	f.Add([]byte(`{"id":"ct_a1b2c3d4e5f6","id":"ct_a1b2c3d4e5f6"}`))
	f.Add([]byte(`{"task":{"inputs":{"a":1e400}}}`))
	f.Add(bytes.Replace(good, []byte(`"n":10`), []byte(`"n":1E3`), 1))
	f.Add(bytes.Replace(good, []byte(`"n":10`), []byte(`"n":-0`), 1))
	f.Add(bytes.Replace(good, []byte(`"n":10`), []byte(`"n":12345678901234567890`), 1))
	f.Add([]byte(`[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		verr := c.Verify()
		out, err := c.Marshal()
		if err != nil {
			t.Fatalf("a parsed contract does not marshal: %v", err)
		}
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("%s does not parse back: %v", out, err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip changed the contract:\n%+v\n%+v", c, back)
		}
		again, err := back.Marshal()
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Marshal is not stable: %v\n%s\n%s", err, out, again)
		}
		if (back.Verify() == nil) != (verr == nil) {
			t.Fatalf("Verify changed its answer over a round trip: %v", verr)
		}
	})
}
