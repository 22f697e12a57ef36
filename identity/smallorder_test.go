package identity

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"math/big"
	"testing"
)

// smallOrderKeys are the encodings of the points of order 1, 2, 4 and 8,
// canonical and not (y ≥ p, or the sign of x set where x = 0).
var smallOrderKeys = []string{
	"0100000000000000000000000000000000000000000000000000000000000000", // identity
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // order 2
	"0000000000000000000000000000000000000000000000000000000000000000", // order 4
	"0000000000000000000000000000000000000000000000000000000000000080", // order 4
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", // order 8
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85", // order 8
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a", // order 8
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa", // order 8
	"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // identity, y = p+1
	"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // order 4, y = p
	"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", // order 4, y = p
	"0100000000000000000000000000000000000000000000000000000000000080", // identity, x sign set
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", // order 2, x sign set
	"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", // identity, y = p+1, x sign set
}

// fieldP is 2^255 - 19.
var fieldP = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))

// x25519Probe is an X25519 key whose clamped scalar is a multiple of the
// cofactor, as every X25519 scalar is.
var x25519Probe = func() *ecdh.PrivateKey {
	k, err := ecdh.X25519().NewPrivateKey(make([]byte, 32))
	if err != nil {
		panic(err)
	}
	return k
}()

// smallOrderReference decides the same question another way, by
// arithmetic rather than a list: the Edwards y maps to the Montgomery
// u = (1+y)/(1−y), and X25519 with a scalar that is a multiple of 8 yields
// zero, which crypto/ecdh refuses, exactly when u is of small order (y = 1,
// the identity, maps to no u).
func smallOrderReference(pub []byte) bool {
	le := make([]byte, 32)
	for i := range le {
		le[i] = pub[31-i]
	}
	le[0] &= 0x7f
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

func TestSmallOrderKeys(t *testing.T) {
	for _, h := range smallOrderKeys {
		pub, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		if !SmallOrder(pub) || !smallOrderReference(pub) {
			t.Errorf("%s: SmallOrder %v, reference %v; want both true", h, SmallOrder(pub), smallOrderReference(pub))
		}
		if _, err := PublicKey(PrincipalID(pub)); !errors.Is(err, ErrSmallOrder) || !errors.Is(err, ErrInvalidPrincipal) {
			t.Errorf("PublicKey(%s): %v, want ErrSmallOrder", h, err)
		}
		if _, err := PublicKeyFromDID(DIDFromPublicKey(pub)); !errors.Is(err, ErrSmallOrder) || !errors.Is(err, ErrInvalidPrincipal) {
			t.Errorf("PublicKeyFromDID(%s): %v, want ErrSmallOrder", h, err)
		}
		if _, err := ParsePrincipal(DIDFromPublicKey(pub)); !errors.Is(err, ErrSmallOrder) {
			t.Errorf("ParsePrincipal(%s): %v, want ErrSmallOrder", h, err)
		}
	}
	// ±y8 sum to p: the two order-8 y values are each other's negation.
	a, _ := hex.DecodeString(smallOrderKeys[4])
	b, _ := hex.DecodeString(smallOrderKeys[6])
	sum := new(big.Int).Add(leInt(a), leInt(b))
	if sum.Cmp(fieldP) != 0 {
		t.Errorf("the order-8 y values sum to %x, want p", sum)
	}
	if !SmallOrder(make([]byte, 31)) {
		t.Error("a 31-byte key is not refused")
	}
}

func leInt(b []byte) *big.Int {
	be := make([]byte, len(b))
	for i := range b {
		be[len(b)-1-i] = b[i]
	}
	return new(big.Int).SetBytes(be)
}

// Every key made from a seed is an ordinary point, and both checks say so;
// the y values next to each small-order one are not small order.
func TestSmallOrderOrdinaryKeys(t *testing.T) {
	for i := 0; i < 512; i++ {
		seed := make([]byte, ed25519.SeedSize)
		seed[0], seed[1] = byte(i), byte(i>>8)
		pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
		if SmallOrder(pub) || smallOrderReference(pub) {
			t.Fatalf("key from seed %d (%x) taken for a small-order point", i, pub)
		}
		if _, err := PublicKey(PrincipalID(pub)); err != nil {
			t.Fatal(err)
		}
		if _, err := PublicKeyFromDID(DIDFromPublicKey(pub)); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range smallOrderKeys {
		pub, _ := hex.DecodeString(h)
		for _, d := range []int{1, -1} {
			q := append([]byte(nil), pub...)
			q[0] = byte(int(q[0]) + d)
			if SmallOrder(q) != smallOrderReference(q) {
				t.Errorf("%x: SmallOrder %v, reference %v", q, SmallOrder(q), smallOrderReference(q))
			}
		}
	}
}

// FuzzSmallOrder: the list and the arithmetic agree on every 32 bytes.
func FuzzSmallOrder(f *testing.F) {
	for _, h := range smallOrderKeys {
		b, _ := hex.DecodeString(h)
		f.Add(b)
	}
	f.Add([]byte(ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey)))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) != 32 {
			if !SmallOrder(b) {
				t.Fatalf("%d bytes not refused", len(b))
			}
			return
		}
		if got, want := SmallOrder(b), smallOrderReference(b); got != want {
			t.Fatalf("%x: SmallOrder %v, reference %v", b, got, want)
		}
	})
}

func BenchmarkSmallOrder(b *testing.B) {
	pub := ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey)
	for b.Loop() {
		SmallOrder(pub)
	}
}
