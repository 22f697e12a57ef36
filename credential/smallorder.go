package credential

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"math/big"
)

// fieldP is 2^255 - 19.
var fieldP = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))

// x25519Probe is a fixed X25519 key whose (clamped) scalar is a multiple of
// the cofactor, as every X25519 scalar is.
var x25519Probe = func() *ecdh.PrivateKey {
	k, err := ecdh.X25519().NewPrivateKey(make([]byte, 32))
	if err != nil {
		panic(err)
	}
	return k
}()

// smallOrder reports whether an Ed25519 public key is a point of order 1,
// 2, 4 or 8, in any encoding crypto/ed25519 accepts. Under such a key,
// signatures that verify can be made without any private key (R the
// identity and S = 0 verify every message under the identity point).
//
// The point's y maps to the Montgomery u = (1+y)/(1-y); X25519 with a
// scalar that is a multiple of 8 yields zero, which crypto/ecdh refuses,
// exactly when u is of small order. y = 1 is the identity.
func smallOrder(pub ed25519.PublicKey) bool {
	le := make([]byte, 32)
	for i := range le {
		le[i] = pub[31-i]
	}
	le[0] &= 0x7f // the sign of x
	y := new(big.Int).SetBytes(le)
	y.Mod(y, fieldP)
	one := big.NewInt(1)
	if y.Cmp(one) == 0 {
		return true
	}
	num := new(big.Int).Add(one, y)
	den := new(big.Int).Sub(one, y)
	den.Mod(den, fieldP)
	u := num.Mul(num, den.ModInverse(den, fieldP))
	u.Mod(u, fieldP)
	be := u.FillBytes(make([]byte, 32))
	for i, j := 0, 31; i < j; i, j = i+1, j-1 {
		be[i], be[j] = be[j], be[i]
	}
	peer, err := ecdh.X25519().NewPublicKey(be)
	if err != nil {
		return true
	}
	_, err = x25519Probe.ECDH(peer)
	return err != nil
}
