// Package freejson reads the free-form JSON values that signed structures
// carry (a contract's inputs and schemas, an attestation's output): strictly,
// and into the RFC 8785 form the signature covers.
package freejson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gowebpki/jcs"

	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/strictjson"
)

// Canonical checks a free-form JSON value and returns its RFC 8785
// form: one value, valid UTF-8, no duplicate member names, nesting within
// maxDepth, every number a finite double, and every integer literal,
// as written and in the canonical form, within ±canon.MaxSafeInteger.
//
// The last rule keeps every reader on the value the signature covers:
// RFC 8785 reads numbers as doubles, so 12345678901234567890 is signed as
// 12345678901234567000, and a double from 2^53 up to 1e21 is written as an
// integer literal (1e20 as 100000000000000000000), which a reader with
// exact integers may take for another value than the double it stands for.
func Canonical(raw []byte, maxDepth int) (json.RawMessage, error) {
	if err := strictjson.Check(raw); err != nil {
		return nil, err
	}
	if err := checkNumbers(raw, maxDepth); err != nil {
		return nil, err
	}
	c, err := jcs.Transform(raw)
	if err != nil {
		return nil, err
	}
	if err := checkNumbers(c, maxDepth); err != nil {
		return nil, fmt.Errorf("canonical form: %w", err)
	}
	return c, nil
}

// checkNumbers walks a value that strictjson.Check accepted.
func checkNumbers(raw []byte, maxDepth int) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	depth := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case json.Delim:
			if t == '{' || t == '[' {
				if depth++; depth > maxDepth {
					return fmt.Errorf("nested deeper than %d levels", maxDepth)
				}
			} else {
				depth--
			}
		case json.Number:
			if err := checkNumber(string(t)); err != nil {
				return err
			}
		}
	}
}

// checkNumber refuses a number no double holds and an integer literal that
// a reader with exact integers would read as another value than its
// canonical (double) form.
func checkNumber(s string) error {
	if !strings.ContainsAny(s, ".eE") {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n > canon.MaxSafeInteger || n < -canon.MaxSafeInteger {
			return fmt.Errorf("integer %s is outside ±(2^53-1)", clip(s))
		}
		return nil
	}
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return fmt.Errorf("number %s is out of the range of a double", clip(s))
		}
		return fmt.Errorf("number %s: %v", clip(s), err)
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}
