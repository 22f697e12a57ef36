package identity

import (
	"bytes"
	"strings"
	"testing"
)

func TestBase58Exported(t *testing.T) {
	for _, b := range [][]byte{{0}, {0, 0, 1}, bytes.Repeat([]byte{0xff}, 64), []byte("hello")} {
		s := EncodeBase58(b)
		got, err := DecodeBase58(s)
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("DecodeBase58(EncodeBase58(%x)) = %x, %v", b, got, err)
		}
	}
	if _, err := DecodeBase58(strings.Repeat("2", MaxBase58Len+1)); err == nil {
		t.Error("an over-long input was decoded")
	}
	for _, bad := range []string{"", "0", "O", "I", "l", "z+"} {
		if _, err := DecodeBase58(bad); err == nil {
			t.Errorf("DecodeBase58(%q) succeeded", bad)
		}
	}
}
