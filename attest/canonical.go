package attest

import (
	"encoding/json"

	"github.com/delegateos/delegateos/internal/freejson"
	"github.com/delegateos/delegateos/internal/strictjson"
)

// MaxValueDepth bounds the nesting of arrays and objects inside an
// output. It sits two levels down in the attestation, which as a whole is
// read within strictjson.MaxDepth.
const MaxValueDepth = strictjson.MaxDepth - 2

// canonicalValue checks a free-form value and returns its RFC 8785 form
// (see freejson.Canonical).
func canonicalValue(raw []byte) (json.RawMessage, error) {
	return freejson.Canonical(raw, MaxValueDepth)
}

// clip shortens an untrusted string quoted in an error.
func clip(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}
