package identity

import "fmt"

// maxBase58Len bounds base58 input before decoding (quadratic in length).
const maxBase58Len = 256

// Base58Encode is the base58btc (Bitcoin alphabet) encoding of b, as
// multibase 'z' values such as an eddsa-jcs-2022 proofValue carry it
// (without the 'z').
func Base58Encode(b []byte) string { return base58Encode(b) }

// Base58Decode decodes base58btc text of at most 256 characters.
func Base58Decode(s string) ([]byte, error) {
	if len(s) > maxBase58Len {
		return nil, fmt.Errorf("base58 text of %d characters is longer than %d", len(s), maxBase58Len)
	}
	return base58Decode(s)
}
