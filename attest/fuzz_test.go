package attest

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzParse: Parse never panics, and an attestation that parses is written
// by Marshal in a form that parses back to the same attestation (and the
// same bytes); verifying it gives the same answer before and after.
func FuzzParse(f *testing.F) {
	good := mustMarshal(f, create(f, aliceKey, fullParams()))
	f.Add(good)
	f.Add(indent(f, good))
	p := testParams()
	p.HashOnly = true
	f.Add(mustMarshal(f, create(f, aliceKey, p)))
	f.Add(bytes.Replace(good, []byte(`"pages":3`), []byte(`"pages":3E0`), 1))
	f.Add(bytes.Replace(good, []byte(`"pages":3`), []byte(`"pages":-0`), 1))
	f.Add(bytes.Replace(good, []byte(`"pages":3`), []byte(`"pages":1e400`), 1))
	f.Add(bytes.Replace(good, []byte(`"score":0.8`), []byte(`"score":null`), 1))
	f.Add([]byte(`{"result":{"output":null}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Parse(data)
		if err != nil {
			return
		}
		verr := a.Verify()
		out, err := a.Marshal()
		if err != nil {
			t.Fatalf("a parsed attestation does not marshal: %v", err)
		}
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("%s does not parse back: %v", out, err)
		}
		if !reflect.DeepEqual(back, a) {
			t.Fatalf("round trip changed the attestation:\n%+v\n%+v", a, back)
		}
		if again, err := back.Marshal(); err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Marshal is not stable: %v", err)
		}
		if (back.Verify() == nil) != (verr == nil) {
			t.Fatalf("Verify changed its answer over a round trip: %v", verr)
		}
	})
}
