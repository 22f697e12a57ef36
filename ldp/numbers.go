package ldp

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/gowebpki/jcs"
)

// The Ed25519 profile signs the JCS form of an envelope, and JCS writes
// every number as the IEEE double nearest to it in its shortest form: 1.0,
// 1e0 and 1 have one JCS form, and so have 9007199254740993 and
// 9007199254740992. A number written otherwise than in its JCS form would
// let one signature stand for envelopes that mean different things to
// whoever reads the bytes (a tool given the input as received), so an
// Ed25519 envelope carries every number in its JCS form (ParseEnvelope
// refuses any other), and SignEd25519 writes them so — refusing a number
// whose JCS form is another number.

// numberIssue is a number literal of a JSON text that is not in its JCS
// form: lit as written, canon its JCS form ("" when it has none: out of
// the range of a double), lossy when canon is another number.
type numberIssue struct {
	lit, canon string
	lossy      bool
}

// firstNumberIssue returns the first number literal of the JSON text data
// that is not in its JCS form; with lossyOnly, the first whose JCS form is
// another number. data must be one JSON value; an error is returned
// otherwise. It reads the bytes once, without decoding them: outside a
// string, a byte that starts a number ('-' or a digit) can start nothing
// else in valid JSON.
func firstNumberIssue(data []byte, lossyOnly bool) (*numberIssue, error) {
	if !json.Valid(data) {
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, err
		}
		return nil, errors.New("invalid JSON")
	}
	for i := 0; i < len(data); {
		switch c := data[i]; {
		case c == '"':
			// Valid JSON: the string ends at the first quote that no
			// backslash escapes.
			for i++; data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
			i++
		case c == '-' || '0' <= c && c <= '9':
			j := i + 1
			for j < len(data) && strings.IndexByte("0123456789.eE+-", data[j]) >= 0 {
				j++
			}
			if is := numberIssueOf(string(data[i:j]), lossyOnly); is != nil {
				return is, nil
			}
			i = j
		default:
			i++
		}
	}
	return nil, nil
}

// numberIssueOf is the issue of the number literal lit (valid JSON), nil
// when it is in its JCS form (or, with lossyOnly, when its JCS form is the
// same number).
func numberIssueOf(lit string, lossyOnly bool) *numberIssue {
	if plainInteger(lit) {
		return nil
	}
	c, err := jcsNumber(lit)
	if err != nil {
		return &numberIssue{lit: lit, lossy: true}
	}
	if c == lit {
		return nil
	}
	lossy := !sameDecimal(lit, c)
	if lossy || !lossyOnly {
		return &numberIssue{lit: lit, canon: c, lossy: lossy}
	}
	return nil
}

// plainInteger says whether the number literal lit (valid JSON) is an
// integer of at most 15 digits other than -0: a double holds it exactly
// and JCS writes it as it is.
func plainInteger(lit string) bool {
	d := strings.TrimPrefix(lit, "-")
	if len(d) == 0 || len(d) > 15 || d == "0" && len(lit) > 1 {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

// jcsNumber is the JCS form of the JSON number literal lit.
func jcsNumber(lit string) (string, error) {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return "", err
	}
	return jcs.NumberToJSON(f)
}

// sameDecimal says whether the JSON number literals a and b denote the
// same number (-0 and 0 included).
func sameDecimal(a, b string) bool {
	na, ok1 := normDecimal(a)
	nb, ok2 := normDecimal(b)
	return ok1 && ok2 && na == nb
}

// normDecimal writes the JSON number literal s as sign, significant digits
// and exponent ("+123e-2" for 1.23, "0" for any zero); ok is false when
// its exponent does not fit an int.
func normDecimal(s string) (string, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, expPart, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return "0", true
	}
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(strings.TrimPrefix(expPart, "+"))
		if err != nil || e > 1<<30 || e < -(1<<30) {
			return "", false
		}
		exp = e
	}
	exp -= len(frac)
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	sign := "+"
	if neg {
		sign = "-"
	}
	return sign + trimmed + "e" + strconv.Itoa(exp), true
}

// checkJCSNumbers refuses a JSON text holding a number not in its JCS form.
func checkJCSNumbers(data []byte) error {
	is, err := firstNumberIssue(data, false)
	if err != nil {
		return err
	}
	if is != nil {
		if is.canon == "" {
			return malformed("number %s is out of the range JCS writes: an ed25519 envelope cannot carry it (send it as a string)", clip(is.lit))
		}
		return malformed("number %s is not in its JCS form %s: the ed25519 profile signs the JCS form, so an ed25519 envelope must carry it as such",
			clip(is.lit), clip(is.canon))
	}
	return nil
}

// lossyNumberError is the refusal of a number whose JCS form (what a
// signature or hash covers) is another number.
func lossyNumberError(is *numberIssue) error {
	if is.canon == "" {
		return errors.New("number " + clip(is.lit) + " is out of the range JCS writes: send it as a string")
	}
	return errors.New("number " + clip(is.lit) + " has the JCS form " + clip(is.canon) +
		", another number (JCS keeps a double's precision): send it as a string")
}
