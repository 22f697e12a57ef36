package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/delegateos/delegateos/internal/strictjson"
)

// decodeValue decodes one JSON value into the representation check
// functions receive: map[string]any, []any, string, json.Number, bool and
// nil. Numbers stay json.Number, so no digit is lost.
//
// It refuses what two JSON readers could read differently or what could
// make a validator slow: invalid UTF-8, unpaired surrogate escapes,
// duplicate member names, nesting deeper than strictjson.MaxDepth, trailing
// data, and numbers longer than MaxNumberLen, with an exponent beyond
// ±MaxExponent or outside the range of a double (JavaScript would read
// them as Infinity).
func decodeValue(data []byte) (any, error) {
	if err := strictjson.Check(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if err := checkNumbers(v); err != nil {
		return nil, err
	}
	return v, nil
}

func checkNumbers(v any) error {
	switch v := v.(type) {
	case json.Number:
		return checkNumber(string(v))
	case []any:
		for _, e := range v {
			if err := checkNumbers(e); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, e := range v {
			if err := checkNumbers(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkNumber bounds one number literal (already valid JSON syntax).
func checkNumber(lit string) error {
	if len(lit) > MaxNumberLen {
		return fmt.Errorf("number longer than %d characters", MaxNumberLen)
	}
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		exp := strings.TrimLeft(strings.TrimLeft(lit[i+1:], "+-"), "0")
		if len(exp) > 3 {
			return fmt.Errorf("number %s: exponent beyond ±%d", lit, MaxExponent)
		}
		if n, _ := strconv.Atoi(exp); n > MaxExponent {
			return fmt.Errorf("number %s: exponent beyond ±%d", lit, MaxExponent)
		}
	}
	if _, err := strconv.ParseFloat(lit, 64); err != nil {
		return fmt.Errorf("number %s is out of the range of a double", lit)
	}
	return nil
}

// decimalKey is the exact decimal value of a JSON number literal in one
// normal form ("-314e-2" for -3.14, "0" for every zero), so two literals
// have the same key exactly when they denote the same number. The literal
// must have passed checkNumber.
func decimalKey(lit string) string {
	neg := strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	exp := 0
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		exp, _ = strconv.Atoi(strings.TrimPrefix(lit[i+1:], "+"))
		lit = lit[:i]
	}
	intPart, frac, _ := strings.Cut(lit, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	if trimmed == "" {
		return "0"
	}
	sign := ""
	if neg {
		sign = "-"
	}
	return sign + trimmed + "e" + strconv.Itoa(exp)
}

// numbersEqual reports whether two number literals denote the same value.
func numbersEqual(a, b json.Number) bool { return decimalKey(string(a)) == decimalKey(string(b)) }

// validatePath checks a dot path: non-empty segments, bounded.
func validatePath(path string) error {
	if path == "" {
		return errors.New("empty path")
	}
	if len(path) > MaxPathLen {
		return fmt.Errorf("path longer than %d bytes", MaxPathLen)
	}
	if n := strings.Count(path, ".") + 1; n > MaxPathSegments {
		return fmt.Errorf("path has more than %d segments", MaxPathSegments)
	}
	for _, seg := range strings.Split(path, ".") {
		if seg == "" {
			return fmt.Errorf("path %q has an empty segment", path)
		}
	}
	return nil
}

// lookup follows a dot path (already validated) through objects and, by
// canonical decimal index, arrays. A member whose value is null exists;
// anything else on the way (a scalar, null, a missing member, an index out
// of range) means the path does not exist.
func lookup(v any, path string) (any, bool) {
	for seg := range strings.SplitSeq(path, ".") {
		switch cur := v.(type) {
		case map[string]any:
			next, ok := cur[seg]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, ok := arrayIndex(seg)
			if !ok || i >= len(cur) {
				return nil, false
			}
			v = cur[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// arrayIndex reads a segment as JavaScript reads an array index: a
// canonical non-negative decimal ("0", "12"; not "01", "+1" or "1e0").
func arrayIndex(seg string) (int, bool) {
	if seg == "" || len(seg) > 9 || (len(seg) > 1 && seg[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// jsonType names a decoded value's JSON type for details.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
