package avpsig

import (
	"bytes"
	"crypto/ed25519"
	"io"
	"strconv"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// fixedReader yields b and then zeros.
func fixedReader(b []byte) io.Reader { return io.MultiReader(bytes.NewReader(b), zeros{}) }

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func testKey(b byte) ed25519.PrivateKey { return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, 32)) }
