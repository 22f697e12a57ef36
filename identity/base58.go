package identity

import "fmt"

// maxBase58Len bounds base58 input before decoding (quadratic in length).
const maxBase58Len = 256

// Base58Encode is the base58btc (Bitcoin alphabet) encoding of b, as
// multibase 'z' values such as an eddsa-jcs-2022 proofValue carry it
// (without the 'z'). It gives the same text as the did:key encoder, nine
// digits at a time.
func Base58Encode(b []byte) string {
	zeros := 0
	for zeros < len(b) && b[zeros] == 0 {
		zeros++
	}
	// Little-endian limbs in base 58^9: 58^9 × 256 fits in 63 bits.
	const limbBase = 58 * 58 * 58 * 58 * 58 * 58 * 58 * 58 * 58
	limbs := make([]uint64, 0, len(b)/6+1)
	for _, c := range b[zeros:] {
		carry := uint64(c)
		for i := range limbs {
			carry += limbs[i] << 8
			limbs[i] = carry % limbBase
			carry /= limbBase
		}
		for carry > 0 {
			limbs = append(limbs, carry%limbBase)
			carry /= limbBase
		}
	}
	digits := make([]byte, 0, len(limbs)*9)
	for i, l := range limbs {
		for k := 0; k < 9; k++ {
			if i == len(limbs)-1 && l == 0 {
				break
			}
			digits = append(digits, byte(l%58))
			l /= 58
		}
	}
	out := make([]byte, zeros+len(digits))
	for i := 0; i < zeros; i++ {
		out[i] = '1'
	}
	for i, d := range digits {
		out[len(out)-1-i] = base58Alphabet[d]
	}
	return string(out)
}

// Base58Decode decodes base58btc text of at most 256 characters.
func Base58Decode(s string) ([]byte, error) {
	if len(s) > maxBase58Len {
		return nil, fmt.Errorf("base58 text of %d characters is longer than %d", len(s), maxBase58Len)
	}
	return base58Decode(s)
}
