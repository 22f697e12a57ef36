package contract

import (
	"encoding/json"

	"github.com/delegateos/delegateos/internal/freejson"
	"github.com/delegateos/delegateos/internal/strictjson"
)

// MaxValueDepth bounds the nesting of arrays and objects inside a free-form
// member (inputs, outputSchema, verification). They sit two levels down in
// the contract, and the contract as a whole is read within
// strictjson.MaxDepth.
const MaxValueDepth = strictjson.MaxDepth - 2

// canonicalValue checks a free-form value and returns its RFC 8785 form
// (see freejson.Canonical).
func canonicalValue(raw []byte) (json.RawMessage, error) {
	return freejson.Canonical(raw, MaxValueDepth)
}

// isObject reports whether a canonical value is a JSON object.
func isObject(v json.RawMessage) bool { return len(v) > 0 && v[0] == '{' }

// clip shortens an untrusted string quoted in an error.
func clip(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}
