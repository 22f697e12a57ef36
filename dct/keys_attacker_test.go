package dct

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/b64"
)

// Red team (issue 26.1): a delegation key covers only signed bytes, so
// nothing an attacker may change without a signer yields a verified token
// whose keys name another's delegations. Held: each variant is refused,
// or (signatures only) keeps every key and verifies only if the signer's.
// (Was TestRedteamKeyNotAttackerChosen.)
func TestDelegationKeyNotAttackerChosen(t *testing.T) {
	tok := chain2(t)
	v := mustVerifier(t, Options{})
	if _, err := v.VerifyChain(tok.String(), t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	raw := decodeJSON(t, tok.String())
	variants := map[string][]byte{
		"whitespace":     bytes.Replace(raw, []byte(`":`), []byte(`": `), 1),
		"escaped char":   bytes.Replace(raw, []byte(`"del_`), []byte(`"\u0064el_`), 1),
		"trailing space": append(append([]byte{}, raw...), ' '),
	}
	// Reordered members: decode into a map and re-encode with Go's order.
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if b, err := json.Marshal(m); err == nil && !bytes.Equal(b, raw) {
		variants["go json order"] = b
	}
	// Attenuations swapped, with their signatures.
	st := tok.Unverified()
	sw := deepCopy(t, st)
	sw.Attenuations[0], sw.Attenuations[1] = sw.Attenuations[1], sw.Attenuations[0]
	sw.Signatures[1], sw.Signatures[2] = sw.Signatures[2], sw.Signatures[1]
	variants["swapped blocks"] = decodeJSON(t, serialize(t, sw))
	// Padded: an attenuation repeated.
	pd := deepCopy(t, st)
	pd.Attenuations = append(pd.Attenuations, pd.Attenuations[1])
	pd.Signatures = append(pd.Signatures, pd.Signatures[2])
	variants["repeated block"] = decodeJSON(t, serialize(t, pd))
	// A signature of another token's block (same key, other signature).
	sg := deepCopy(t, st)
	sg.Signatures[2] = sg.Signatures[1]
	variants["other signature"] = decodeJSON(t, serialize(t, sg))
	// A second spelling of a signature: its unused trailing bits set.
	nb := deepCopy(t, st)
	sgs := []byte(nb.Signatures[2].Signature)
	const alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	sgs[len(sgs)-1] = alpha[strings.IndexByte(alpha, sgs[len(sgs)-1])|1]
	nb.Signatures[2].Signature = string(sgs)
	variants["signature trailing bits"] = decodeJSON(t, serialize(t, nb))
	// The unsigned members of a signature: its signer and the block it covers.
	sn := deepCopy(t, st)
	sn.Signatures[2].Signer = sn.Signatures[1].Signer
	variants["signature signer"] = decodeJSON(t, serialize(t, sn))
	cv := deepCopy(t, st)
	cv.Signatures[1].Covers, cv.Signatures[2].Covers = cv.Signatures[2].Covers, cv.Signatures[1].Covers
	variants["signature covers swapped"] = decodeJSON(t, serialize(t, cv))
	// The signatures listed in another order, each with its block.
	so := deepCopy(t, st)
	so.Signatures[1], so.Signatures[2] = so.Signatures[2], so.Signatures[1]
	variants["signatures reordered"] = decodeJSON(t, serialize(t, so))
	for name, b := range variants {
		if _, err := v.VerifyChain(b64.Encode(b), t0.Add(time.Minute)); err == nil {
			t.Errorf("%s: a re-encoded token verified", name)
		}
	}
	if strings.Contains(string(raw), "\\u") {
		t.Log("the canonical token already holds an escape")
	}
}
