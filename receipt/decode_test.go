package receipt

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzFastDecode: whatever fastDecode accepts that Parse would keep (its
// re-encoding is the input) decodes to the same body with encoding/json,
// so that the fast path never changes what a receipt says.
func FuzzFastDecode(f *testing.F) {
	odd := "a<b>&c\\\"d\\\\e\\u0001\\u001f é😀\\ud83d\\ude00\\ud800x"
	f.Add([]byte(`{"action":"mcp.tools.call","audit_id":"u","capability":{"action":"call","namespace":"mcp","resource":"` + odd + `"},"chain":["a","b"],"cost_reserved":-5,"enforced":true,"schema_version":"decision_receipt/2"}`))
	f.Add([]byte(`{"at":"x","audit_prev":"` + strings.Repeat("ab", 32) + `","audit_seq":4,"checkpoint":"a\n1\n","final":false,"head":"h","length":3,"recovered":true,"schema_version":"audit_checkpoint/3","proof":{"cryptosuite":"c","proofValue":"z1","type":"t","verificationMethod":"v"}}`))
	f.Add([]byte(`{"schema_version":"execution_receipt/2","duration_us":0,"result":{"a":1}}`))
	for _, b := range oddBodies() {
		if data, err := encode(b); err == nil {
			f.Add(data)
		}
	}
	kinds := []func() Body{
		func() Body { return new(DecisionBody) }, func() Body { return new(ExecutionBody) },
		func() Body { return new(HumanApprovalBody) }, func() Body { return new(CheckpointBody) },
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, k := range kinds {
			fast := k()
			if !fastDecode(data, fast) {
				continue
			}
			again, err := encode(fast)
			if err != nil || !bytes.Equal(again, data) {
				continue
			}
			slow := k()
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.DisallowUnknownFields()
			if err := dec.Decode(slow); err != nil {
				t.Fatalf("%T: fast decoding took %q, encoding/json refuses it: %v", fast, data, err)
			}
			if !reflect.DeepEqual(fast, slow) {
				t.Fatalf("%T: %q decodes to\n%+v\nnot, as encoding/json, to\n%+v", fast, data, fast, slow)
			}
		}
	})
}

// Every kind of receipt the encoder writes decodes on the fast path (but
// for raw JSON members, which encoding/json decodes) to what
// encoding/json gives.
func TestFastDecodeMatchesJSON(t *testing.T) {
	fastOnes := 0
	for _, b := range oddBodies() {
		data, err := encode(b)
		if err != nil {
			t.Fatal(err)
		}
		fast := reflect.New(reflect.TypeOf(b).Elem()).Interface().(Body)
		slow := reflect.New(reflect.TypeOf(b).Elem()).Interface().(Body)
		if err := json.Unmarshal(data, slow); err != nil {
			t.Fatal(err)
		}
		if !fastDecode(data, fast) {
			if !bytes.Contains(data, []byte(`"arguments":`)) && !bytes.Contains(data, []byte(`"result":`)) {
				t.Errorf("fast decoding refuses %s", data)
			}
			continue
		}
		fastOnes++
		if !reflect.DeepEqual(fast, slow) {
			t.Errorf("%s decodes to\n%+v\nnot, as encoding/json, to\n%+v", data, fast, slow)
		}
	}
	if fastOnes < 6 {
		t.Fatalf("only %d receipts took the fast path", fastOnes)
	}
}
