package identity

import "fmt"

// MaxBase58Len bounds the input DecodeBase58 takes: the conversion is
// quadratic in length, and nothing this project decodes comes near it.
const MaxBase58Len = 256

// EncodeBase58 returns b in base58btc (the Bitcoin alphabet), without the
// multibase prefix 'z'.
func EncodeBase58(b []byte) string { return base58Encode(b) }

// DecodeBase58 reads base58btc text, without the multibase prefix 'z', of at
// most MaxBase58Len characters. Each leading '1' is a leading zero byte, so
// every byte string has exactly one encoding, and EncodeBase58 of the result
// gives s back.
func DecodeBase58(s string) ([]byte, error) {
	if len(s) > MaxBase58Len {
		return nil, fmt.Errorf("base58 text is %d characters, more than %d", len(s), MaxBase58Len)
	}
	return base58Decode(s)
}
