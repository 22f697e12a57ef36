package dct

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/b64"
)

// A delegation's key is the same in every token that carries its block
// (its prefix, or a token attenuated further), and differs between two
// delegations that share every ID: whoever attenuates chooses IDs, not
// keys.
func TestDelegationKeys(t *testing.T) {
	tok := chain2(t)
	keys := tok.DelegationKeys()
	if len(keys) != 3 {
		t.Fatalf("%d keys for 3 blocks", len(keys))
	}
	for _, k := range keys {
		if !ValidDelegationKey(k) {
			t.Errorf("key %q does not read as one", k)
		}
	}
	for n := 1; n <= 3; n++ {
		p, err := tok.Prefix(n)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.DelegationKeys(); !slices.Equal(got, keys[:n]) {
			t.Errorf("prefix %d has keys %v; want %v", n, got, keys[:n])
		}
	}
	// Another tree with the same IDs: root issues dave a token under
	// alice's root ID, and dave attenuates it under alice's IDs.
	p := rootParams()
	p.Delegatee = daveKey.ID()
	other := mustCreate(t, p)
	other = mustAttenuate(t, other, AttenuateParams{Attenuator: daveKey, Delegatee: bobKey.ID(), DelegationID: "del_000000000002", ContractID: "ct_000000000002"})
	ok := other.DelegationKeys()
	for i := range ok {
		if ok[i] == keys[i] {
			t.Errorf("block %d: two delegations share key %s", i, ok[i])
		}
	}
	for _, bad := range []string{"", "del_000000000001", keys[0][:42], keys[0] + "A", keys[0][:42] + "="} {
		if ValidDelegationKey(bad) {
			t.Errorf("ValidDelegationKey(%q) = true", bad)
		}
	}
}

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
