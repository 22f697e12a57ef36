package ldp

import (
	"encoding/json"
	"os"
	"testing"
)

// FuzzParseEnvelope checks that an envelope that parses writes back to
// bytes that parse to the same envelope, and that its signing inputs can
// be computed.
func FuzzParseEnvelope(f *testing.F) {
	for _, s := range specFlow {
		f.Add([]byte(s))
	}
	if data, err := os.ReadFile("testdata/hmac_vectors.json"); err == nil {
		var file struct {
			Vectors []hmacVector `json:"vectors"`
		}
		if json.Unmarshal(data, &file) == nil {
			for _, v := range file.Vectors[:6] {
				f.Add([]byte(v.Envelope))
			}
		}
	}
	e := submitEnvelope()
	if SignEd25519(e, testKey(1)) == nil {
		b, _ := json.Marshal(e)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseEnvelope(data)
		if err != nil {
			return
		}
		_ = HMACInput(e)
		if _, err := Ed25519Input(e); err != nil {
			t.Fatalf("parsed but has no Ed25519 input: %v", err)
		}
		b1, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("parsed but does not marshal: %v", err)
		}
		e2, err := ParseEnvelope(b1)
		if err != nil {
			t.Fatalf("%q parsed, its encoding %s does not: %v", data, b1, err)
		}
		b2, _ := json.Marshal(e2)
		if string(b1) != string(b2) {
			t.Fatalf("round trip changed\n%s\n%s", b1, b2)
		}
		if string(HMACInput(e)) != string(HMACInput(e2)) {
			t.Fatal("round trip changed the HMAC input")
		}
	})
}

// FuzzParseCard checks that a card that parses writes back to one that
// parses the same.
func FuzzParseCard(f *testing.F) {
	f.Add([]byte(specCard))
	f.Add([]byte(pythonCard))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCard(data)
		if err != nil {
			return
		}
		b1, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := ParseCard(b1)
		if err != nil {
			t.Fatalf("%q parsed, its encoding %s does not: %v", data, b1, err)
		}
		b2, _ := json.Marshal(c2)
		if string(b1) != string(b2) {
			t.Fatalf("round trip changed\n%s\n%s", b1, b2)
		}
	})
}

// FuzzResponderHandle feeds arbitrary bytes to a Responder (signatures not
// checked, so that parsed envelopes reach the lifecycle): it must answer
// every envelope it can parse with a valid one, and never panic.
func FuzzResponderHandle(f *testing.F) {
	for _, s := range specFlow {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		exec := &echoExec{started: make(chan struct{})}
		r := &Responder{Card: echoCard("http://127.0.0.1:1"), Exec: exec}
		r.Card.DelegateID = "ldp:delegate:qwen3-8b-reasoning"
		r.Card.Capabilities = r.Card.Capabilities[:2] // no "slow", which waits for a cancel
		reply, err := r.Handle(ctx, data, "", nil)
		if err != nil || reply == nil {
			return
		}
		b, err := json.Marshal(reply)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseEnvelope(b); err != nil {
			t.Fatalf("reply %s does not parse: %v", b, err)
		}
	})
}
