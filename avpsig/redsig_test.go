package avpsig

import (
	"encoding/binary"
	"testing"
	"time"
)

// One signer cannot take the whole nonce memory: a holder of any token the
// gate takes, however little it grants, would otherwise have every other
// signer refused as busy for as long as it keeps its nonces live.
func TestOneSignerCannotFillNonceMemory(t *testing.T) {
	greedy, other := testKey(5), testKey(6)
	v := &Verifier{Now: func() (t time.Time) { return t0 }}
	var n [16]byte
	refused := false
	for i := range DefaultMaxNonces {
		binary.BigEndian.PutUint64(n[:], uint64(i)+1)
		s, err := Sign(greedy, "POST", "/mcp", "", nil, t0, fixedReader(n[:]))
		if err != nil {
			t.Fatal(err)
		}
		if err := v.VerifyParts("POST", "/mcp", "", []string{s.Signature}, nil, nil, did(greedy)); err != nil {
			if reason(err) != ReasonBusy {
				t.Fatal(err)
			}
			refused = true
			break
		}
	}
	if !refused {
		t.Fatalf("one signer holds all %d nonces", v.Nonces())
	}
	if err := v.Verify(signed(t, other, t0, 1, "GET", "/", ""), nil, did(other)); err != nil {
		t.Fatalf("another signer, once one has spent %d nonces: %v", v.Nonces(), err)
	}
}
