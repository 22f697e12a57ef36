package identity

import (
	"crypto/ed25519"
	"errors"
)

// ErrSmallOrder is wrapped by the error for a public key that is a point of
// order 1, 2, 4 or 8. Under such a key a signature proves nothing: with the
// identity point, R = identity and S = 0 verify every message, and the
// others admit forgeries as cheaply. A principal, a delegatee, a signer of
// a credential or of a request is never such a key.
var ErrSmallOrder = errors.New("public key of small order")

// smallOrderY are the y-coordinates (little-endian, reduced mod p) of the
// eight points of small order: 1 (the identity), p−1 (order 2), 0 (the two
// points of order 4), and ±y8 (the four points of order 8; each y stands
// for a point and its negation).
var smallOrderY = [5][32]byte{
	{1},
	{0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
	{},
	{0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0,
		0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05},
	{0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67, 0x0f,
		0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a},
}

// SmallOrder reports whether pub, in any encoding crypto/ed25519 might
// decode (the sign bit of x either way, y canonical or y+p), is a point of
// small order. It compares y with the five that such points have, after
// reducing y mod p: a y of 255 bits is at least p only when it is p+k for
// k < 19. A key of another length is not a point at all and reported as
// small order, so that nothing relying on this check accepts it.
func SmallOrder(pub ed25519.PublicKey) bool {
	if len(pub) != ed25519.PublicKeySize {
		return true
	}
	var y [32]byte
	copy(y[:], pub)
	y[31] &= 0x7f // the sign of x
	if y[31] == 0x7f && y[0] >= 0xed && allFF(y[1:31]) {
		y = [32]byte{y[0] - 0xed}
	}
	for i := range smallOrderY {
		if y == smallOrderY[i] {
			return true
		}
	}
	return false
}

func allFF(b []byte) bool {
	for _, c := range b {
		if c != 0xff {
			return false
		}
	}
	return true
}
