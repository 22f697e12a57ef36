package verify

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode/utf16"

	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/strictjson"
)

// builtins are the check functions of §6.2.
func builtins() map[string]CheckFunc {
	return map[string]CheckFunc{
		"regex_match":   regexMatch,
		"json_schema":   jsonSchema,
		"string_length": stringLength,
		"array_length":  arrayLength,
		"field_exists":  fieldExists,
		"exit_code":     exitCode,
		"output_equals": outputEquals,
	}
}

// regexMatch: { pattern: string, flags?: string, field?: string }. Passes
// when new RegExp(pattern, flags).test(value) would; a value that is not a
// string fails.
func regexMatch(output any, params json.RawMessage) (CheckResult, error) {
	const name = "regex_match"
	var p struct {
		Pattern *string `json:"pattern"`
		Flags   *string `json:"flags"`
		Field   *string `json:"field"`
	}
	if err := decodeParams(name, params, &p); err != nil {
		return CheckResult{}, err
	}
	if p.Pattern == nil {
		return CheckResult{}, paramsErr(name, "pattern is required")
	}
	flags := ""
	if p.Flags != nil {
		flags = *p.Flags
	}
	re, err := compileJSRegex(*p.Pattern, flags)
	if err != nil {
		return CheckResult{}, paramsErr(name, "%v", err)
	}
	v, found, err := fieldValue(name, output, p.Field)
	if err != nil {
		return CheckResult{}, err
	}
	if !found {
		return passFail(false, fmt.Sprintf("field %q not found", *p.Field)), nil
	}
	s, ok := v.(string)
	if !ok {
		return passFail(false, fmt.Sprintf("value is %s, not a string", jsonType(v))), nil
	}
	matched, err := re.test(s)
	if err != nil {
		return CheckResult{}, paramsErr(name, "%v", err)
	}
	return passFail(matched, "no match for the pattern"), nil
}

// jsonSchema: { schema: JSONSchema }. Validates the output against a
// draft-07 schema (see compileSchema).
func jsonSchema(output any, params json.RawMessage) (CheckResult, error) {
	const name = "json_schema"
	var p struct {
		Schema json.RawMessage `json:"schema"`
	}
	if err := decodeParams(name, params, &p); err != nil {
		return CheckResult{}, err
	}
	if len(p.Schema) == 0 {
		return CheckResult{}, paramsErr(name, "schema is required")
	}
	s, err := compileSchema(p.Schema)
	if err != nil {
		return CheckResult{}, paramsErr(name, "%v", err)
	}
	return validateSchema(s, output)
}

// lengthParams are string_length's and array_length's params.
type lengthParams struct {
	Min   *int64  `json:"min"`
	Max   *int64  `json:"max"`
	Field *string `json:"field"`
}

func (p *lengthParams) decode(name string, params json.RawMessage) error {
	if err := decodeParams(name, params, p); err != nil {
		return err
	}
	if p.Min == nil && p.Max == nil {
		return paramsErr(name, "min or max is required")
	}
	for _, b := range []*int64{p.Min, p.Max} {
		if b != nil && (*b < 0 || *b > canon.MaxSafeInteger) {
			return paramsErr(name, "min and max must be integers in [0, 2^53-1]")
		}
	}
	if p.Min != nil && p.Max != nil && *p.Min > *p.Max {
		return paramsErr(name, "min %d is greater than max %d", *p.Min, *p.Max)
	}
	return nil
}

func (p *lengthParams) check(n int64, what string) CheckResult {
	ok := (p.Min == nil || n >= *p.Min) && (p.Max == nil || n <= *p.Max)
	return passFail(ok, fmt.Sprintf("%s %d out of bounds %s", what, n, p.bounds()))
}

func (p *lengthParams) bounds() string {
	lo, hi := "0", "∞"
	if p.Min != nil {
		lo = fmt.Sprint(*p.Min)
	}
	if p.Max != nil {
		hi = fmt.Sprint(*p.Max)
	}
	return "[" + lo + ", " + hi + "]"
}

// stringLength: { min?, max?, field? }. The length is counted in UTF-16
// code units, as JavaScript's String.length counts.
func stringLength(output any, params json.RawMessage) (CheckResult, error) {
	const name = "string_length"
	var p lengthParams
	if err := p.decode(name, params); err != nil {
		return CheckResult{}, err
	}
	v, found, err := fieldValue(name, output, p.Field)
	if err != nil {
		return CheckResult{}, err
	}
	if !found {
		return passFail(false, fmt.Sprintf("field %q not found", *p.Field)), nil
	}
	s, ok := v.(string)
	if !ok {
		return passFail(false, fmt.Sprintf("value is %s, not a string", jsonType(v))), nil
	}
	return p.check(utf16Len(s), "length"), nil
}

// utf16Len is len(s) in UTF-16 code units.
func utf16Len(s string) int64 {
	var n int64
	for _, r := range s {
		n += int64(utf16.RuneLen(r))
	}
	return n
}

// arrayLength: { min?, max?, field? }.
func arrayLength(output any, params json.RawMessage) (CheckResult, error) {
	const name = "array_length"
	var p lengthParams
	if err := p.decode(name, params); err != nil {
		return CheckResult{}, err
	}
	v, found, err := fieldValue(name, output, p.Field)
	if err != nil {
		return CheckResult{}, err
	}
	if !found {
		return passFail(false, fmt.Sprintf("field %q not found", *p.Field)), nil
	}
	a, ok := v.([]any)
	if !ok {
		return passFail(false, fmt.Sprintf("value is %s, not an array", jsonType(v))), nil
	}
	return p.check(int64(len(a)), "array length"), nil
}

// fieldExists: { fields: string[] }. Every dot path must lead to a member;
// a member whose value is null exists (JavaScript's !== undefined).
func fieldExists(output any, params json.RawMessage) (CheckResult, error) {
	const name = "field_exists"
	var p struct {
		Fields []string `json:"fields"`
	}
	if err := decodeParams(name, params, &p); err != nil {
		return CheckResult{}, err
	}
	if len(p.Fields) == 0 || len(p.Fields) > MaxFields {
		return CheckResult{}, paramsErr(name, "fields must list 1 to %d paths", MaxFields)
	}
	var missing []string
	for _, f := range p.Fields {
		if err := validatePath(f); err != nil {
			return CheckResult{}, paramsErr(name, "fields: %v", err)
		}
		if _, ok := lookup(output, f); !ok {
			missing = append(missing, f)
		}
	}
	return passFail(len(missing) == 0, "missing fields: "+strings.Join(missing, ", ")), nil
}

// exitCode: { expected: integer }. The output must be an object whose
// exitCode member is a number equal to expected.
func exitCode(output any, params json.RawMessage) (CheckResult, error) {
	const name = "exit_code"
	var p struct {
		Expected json.RawMessage `json:"expected"`
	}
	if err := decodeParams(name, params, &p); err != nil {
		return CheckResult{}, err
	}
	if len(p.Expected) == 0 {
		return CheckResult{}, paramsErr(name, "expected is required")
	}
	want, err := decodeValue(p.Expected)
	n, isNumber := want.(json.Number)
	if err != nil || !isNumber || !isSafeInteger(n) {
		return CheckResult{}, paramsErr(name, "expected must be an integer in ±(2^53-1)")
	}
	obj, ok := output.(map[string]any)
	if !ok {
		return passFail(false, fmt.Sprintf("output is %s, not an object with exitCode", jsonType(output))), nil
	}
	got, ok := obj["exitCode"]
	if !ok {
		return passFail(false, "output has no exitCode"), nil
	}
	g, ok := got.(json.Number)
	if !ok {
		return passFail(false, fmt.Sprintf("exitCode is %s, not a number", jsonType(got))), nil
	}
	return passFail(numbersEqual(g, n), fmt.Sprintf("exitCode %s, expected %s", g, n)), nil
}

// isSafeInteger reports whether n is an integer within ±(2^53−1).
func isSafeInteger(n json.Number) bool {
	if _, exp, _ := strings.Cut(decimalKey(string(n)), "e"); strings.HasPrefix(exp, "-") {
		return false // a fraction
	}
	f, err := n.Float64()
	return err == nil && math.Abs(f) <= canon.MaxSafeInteger
}

// outputEquals: { expected: unknown }. The output and expected must have
// the same RFC 8785 canonical JSON, and every pair of numbers the canonical
// form compares must be equal as exact decimals too (RFC 8785 writes
// numbers as doubles, so 9007199254740993 and 9007199254740992 would
// otherwise be equal).
func outputEquals(output any, params json.RawMessage) (CheckResult, error) {
	const name = "output_equals"
	var p struct {
		Expected json.RawMessage `json:"expected"`
	}
	// expected may be null, so decodeParams' null rule is applied by hand.
	if len(params) == 0 {
		return CheckResult{}, paramsErr(name, "checkParams are required")
	}
	if doc, err := decodeValue(params); err != nil {
		return CheckResult{}, paramsErr(name, "%v", err)
	} else if _, ok := doc.(map[string]any); !ok {
		return CheckResult{}, paramsErr(name, "checkParams must be an object, not %s", jsonType(doc))
	}
	if err := strictjson.Unmarshal(params, &p); err != nil {
		return CheckResult{}, paramsErr(name, "%v", err)
	}
	if len(p.Expected) == 0 {
		return CheckResult{}, paramsErr(name, "expected is required")
	}
	want, err := decodeValue(p.Expected)
	if err != nil {
		return CheckResult{}, paramsErr(name, "expected: %v", err)
	}
	wantCanon, err := canon.Marshal(want)
	if err != nil {
		return CheckResult{}, paramsErr(name, "expected: %v", err)
	}
	gotCanon, err := canon.Marshal(output)
	if err != nil {
		return passFail(false, fmt.Sprintf("output cannot be canonicalized: %v", err)), nil
	}
	if string(gotCanon) != string(wantCanon) {
		return passFail(false, fmt.Sprintf("output %s does not equal expected %s",
			truncate(string(gotCanon), 200), truncate(string(wantCanon), 200))), nil
	}
	if !exactlyEqual(output, want) {
		return passFail(false, "output differs from expected in a number beyond double precision"), nil
	}
	return passFail(true, ""), nil
}

// exactlyEqual compares two decoded values, numbers as exact decimals.
func exactlyEqual(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		return ok && numbersEqual(a, b)
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !exactlyEqual(a[i], b[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			w, ok := b[k]
			if !ok || !exactlyEqual(v, w) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}
