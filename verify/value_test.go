package verify

import (
	"encoding/json"
	"math/big"
	"testing"
)

func TestDecimalKey(t *testing.T) {
	for _, c := range [][2]string{
		{"0", "0"}, {"-0", "0"}, {"0.000", "0"}, {"0e5", "0"},
		{"1", "1e0"}, {"1.0", "1e0"}, {"10", "1e1"}, {"1e1", "1e1"}, {"100e-1", "1e1"},
		{"-3.14", "-314e-2"}, {"0.1", "1e-1"}, {"0.10", "1e-1"}, {"1E+2", "1e2"},
		{"9007199254740993", "9007199254740993e0"},
	} {
		if got := decimalKey(c[0]); got != c[1] {
			t.Errorf("decimalKey(%s) = %s, want %s", c[0], got, c[1])
		}
	}
}

// TestNumbersEqualExact: numbersEqual agrees with exact rational equality.
func TestNumbersEqualExact(t *testing.T) {
	lits := []string{"0", "-0", "1", "1.0", "1e0", "10e-1", "0.1", "1e-1", "0.30000000000000004", "0.3",
		"9007199254740992", "9007199254740993", "-2.5E+3", "-2500", "123.456e2", "12345.6"}
	for _, a := range lits {
		for _, b := range lits {
			ra, _ := new(big.Rat).SetString(a)
			rb, _ := new(big.Rat).SetString(b)
			if got, want := numbersEqual(json.Number(a), json.Number(b)), ra.Cmp(rb) == 0; got != want {
				t.Errorf("numbersEqual(%s, %s) = %v", a, b, got)
			}
		}
	}
}

func TestCheckNumber(t *testing.T) {
	for lit, ok := range map[string]bool{
		"1": true, "-1.5e-300": true, "1e308": true, "1e400": false, "1e-400": true, "1e401": false,
		"1e-401": false, "1e-0000000400": true, "1e-0000000401": false, "1.7976931348623157e308": true,
		"1.8e308": false, "1e99999999": false,
	} {
		if err := checkNumber(lit); (err == nil) != ok {
			t.Errorf("checkNumber(%s) = %v", lit, err)
		}
	}
}

func TestLookup(t *testing.T) {
	v, err := decodeValue([]byte(`{"a":{"b":[10,{"c":null}]},"0":"zero"}`))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		"a": true, "a.b": true, "a.b.0": true, "a.b.1.c": true, "0": true,
		"a.b.2": false, "a.b.01": false, "a.b.-1": false, "a.b.+1": false, "a.c": false,
		"a.b.1.c.d": false, "a.b.0.x": false, "b": false,
	} {
		if _, ok := lookup(v, path); ok != want {
			t.Errorf("lookup(%s) = %v", path, ok)
		}
	}
}
