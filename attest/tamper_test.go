package attest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/sig"
)

// fullParams set every optional member, so that each can be tampered with.
func fullParams() CreateParams {
	p := testParams()
	score, details := 0.8, "8 of 10 checks"
	p.Outcome = &VerificationOutcome{Method: "deterministic_check", Passed: true, Score: &score, Details: &details}
	p.Children = []string{idN("att_", 1), idN("att_", 2)}
	p.DelegationKey = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	p.Output = json.RawMessage(`{"summary":"Quantum computers factor integers.","pages":3,"ratio":0.1,"refs":["a","b"],"draft":false,"extra":null}`)
	return p
}

// tamperCase changes one signed field to another well-formed value; only
// the signature can refuse the result.
type tamperCase struct {
	field  string // the JSON path of the field it changes, for the coverage check
	name   string
	mutate func(a *Attestation)
	want   error // default ErrInvalidSignature
}

func tamperCases(t *testing.T) []tamperCase {
	var cs []tamperCase
	set := func(field, name string, m func(*Attestation)) {
		cs = append(cs, tamperCase{field: field, name: name, mutate: m})
	}
	malformedCase := func(field, name string, m func(*Attestation)) {
		cs = append(cs, tamperCase{field: field, name: name, mutate: m, want: ErrMalformed})
	}
	output := func(name string, f func(v map[string]any)) {
		set("result.output", name, func(a *Attestation) { a.Result.Output = editJSON(t, a.Result.Output, f) })
	}
	str := func(s string) *string { return &s }
	num := func(f float64) *float64 { return &f }

	set("id", "another id", func(a *Attestation) { a.ID = idN("att_", 0xabc) })
	malformedCase("version", "0.2", func(a *Attestation) { a.Version = "0.2" })
	set("contractId", "another contract", func(a *Attestation) { a.ContractID = "ct_000000000002" })
	set("delegationId", "another delegation", func(a *Attestation) { a.DelegationID = "del_000000000002" })
	set("delegationKey", "another delegation key", func(a *Attestation) { a.DelegationKey = "BAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" })
	set("delegationKey", "removed", func(a *Attestation) { a.DelegationKey = "" })
	malformedCase("delegationKey", "not a key", func(a *Attestation) { a.DelegationKey = "AAAA" })
	set("principal", "another principal", func(a *Attestation) { a.Principal = evilKey.ID() })
	malformedCase("principal", "the same principal as did:key", func(a *Attestation) { a.Principal = aliceKey.DID() })
	set("createdAt", "later", func(a *Attestation) { a.CreatedAt = "2026-01-01T01:00:00.001Z" })
	set("createdAt", "same instant written differently", func(a *Attestation) { a.CreatedAt = "2026-01-01T02:00:00+01:00" })
	set("type", "delegation_verification", func(a *Attestation) { a.Type = DelegationVerification })

	set("result.success", "false", func(a *Attestation) { a.Result.Success = false })
	output("string member", func(v map[string]any) { v["summary"] = "Quantum computers factor integers!" })
	output("integer member", func(v map[string]any) { v["pages"] = json.Number("4") })
	output("fraction member", func(v map[string]any) { v["ratio"] = json.Number("0.10000000000000002") })
	output("array reordered", func(v map[string]any) { v["refs"] = []any{"b", "a"} })
	output("boolean", func(v map[string]any) { v["draft"] = true })
	output("null to 0", func(v map[string]any) { v["extra"] = json.Number("0") })
	output("member removed", func(v map[string]any) { delete(v, "extra") })
	output("member added", func(v map[string]any) { v["more"] = "x" })
	set("result.output", "removed", func(a *Attestation) { a.Result.Output = nil })
	set("result.output", "null", func(a *Attestation) { a.Result.Output = json.RawMessage(`null`) })
	set("result.outputHash", "added", func(a *Attestation) {
		h, err := OutputHash(a.Result.Output)
		if err != nil {
			panic(err)
		}
		a.Result.OutputHash = &h
	})
	set("result.outputHash", "replaces the output", func(a *Attestation) {
		h, _ := OutputHash(a.Result.Output)
		a.Result.OutputHash, a.Result.Output = &h, nil
	})
	set("result.costMicrocents", "lowered", func(a *Attestation) { a.Result.CostMicrocents = 999 })
	set("result.costMicrocents", "to 0", func(a *Attestation) { a.Result.CostMicrocents = 0 })
	set("result.durationMs", "changed", func(a *Attestation) { a.Result.DurationMs = 1 })
	set("result.verificationOutcome", "removed", func(a *Attestation) { a.Result.VerificationOutcome = nil })
	set("result.verificationOutcome.method", "changed", func(a *Attestation) { a.Result.VerificationOutcome.Method = "schema_match" })
	set("result.verificationOutcome.passed", "false", func(a *Attestation) { a.Result.VerificationOutcome.Passed = false })
	set("result.verificationOutcome.score", "changed", func(a *Attestation) { a.Result.VerificationOutcome.Score = num(0.9) })
	set("result.verificationOutcome.score", "removed", func(a *Attestation) { a.Result.VerificationOutcome.Score = nil })
	set("result.verificationOutcome.score", "to 0", func(a *Attestation) { a.Result.VerificationOutcome.Score = num(0) })
	set("result.verificationOutcome.details", "changed", func(a *Attestation) { a.Result.VerificationOutcome.Details = str("9 of 10 checks") })
	set("result.verificationOutcome.details", "emptied", func(a *Attestation) { a.Result.VerificationOutcome.Details = str("") })
	set("result.verificationOutcome.details", "removed", func(a *Attestation) { a.Result.VerificationOutcome.Details = nil })
	set("childAttestations", "one removed", func(a *Attestation) { a.ChildAttestations = a.ChildAttestations[:1] })
	set("childAttestations", "one added", func(a *Attestation) { a.ChildAttestations = append(a.ChildAttestations, idN("att_", 3)) })
	set("childAttestations", "reordered", func(a *Attestation) {
		a.ChildAttestations = []string{a.ChildAttestations[1], a.ChildAttestations[0]}
	})
	set("childAttestations", "one replaced", func(a *Attestation) { a.ChildAttestations[0] = idN("att_", 4) })
	set("childAttestations", "emptied", func(a *Attestation) { a.ChildAttestations = []string{} })

	set("signature", "one bit flipped", func(a *Attestation) {
		b := []byte(a.Signature)
		// Another base64url digit, whatever the signature holds there.
		if b[10] == 'A' {
			b[10] = 'B'
		} else {
			b[10] = 'A'
		}
		a.Signature = string(b)
	})
	set("signature", "another attestation's", func(a *Attestation) {
		p := fullParams()
		p.ID = idN("att_", 0xfff)
		a.Signature = create(t, aliceKey, p).Signature
	})
	set("signature", "the same bytes signed by another key", func(a *Attestation) {
		payload, err := a.signedPayload()
		if err != nil {
			panic(err)
		}
		a.Signature = sig.SignCanonical(evilKey.PrivateKey(), payload)
	})
	return cs
}

func TestTamper(t *testing.T) {
	orig := create(t, aliceKey, fullParams())
	origBytes := mustMarshal(t, orig)
	for _, tc := range tamperCases(t) {
		t.Run(tc.field+"/"+tc.name, func(t *testing.T) {
			a, err := Parse(origBytes)
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(a)
			if reflect.DeepEqual(a, orig) {
				t.Fatal("the change changed nothing")
			}
			want := tc.want
			if want == nil {
				want = ErrInvalidSignature
			}
			if err := a.Verify(); !errors.Is(err, want) {
				t.Errorf("Verify: got %v, want %v", err, want)
			}
			b, err := a.canonical()
			if err != nil {
				t.Fatal(err)
			}
			if back, err := Parse(b); err == nil {
				if err := back.Verify(); err == nil {
					t.Error("the tampered file verifies")
				}
			}
		})
	}
}

// Every field of an attestation, nested ones included, has a tamper case.
func TestTamperCoverage(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range tamperCases(t) {
		covered[tc.field] = true
	}
	var missing []string
	for _, f := range jsonFields(reflect.TypeFor[Attestation](), "") {
		if !covered[f] {
			missing = append(missing, f)
		}
		delete(covered, f)
	}
	if len(missing) > 0 {
		t.Errorf("fields without a tamper case: %v", missing)
	}
	for f := range covered {
		t.Errorf("tamper case for %q, which is not a field", f)
	}
}

// jsonFields lists the JSON paths of every field of a struct type: a field
// that is a struct (or a pointer to one) is listed and so are its fields.
func jsonFields(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			if f.Type.Kind() == reflect.Pointer {
				out = append(out, prefix+name) // the optional struct as a whole
			}
			out = append(out, jsonFields(ft, prefix+name+".")...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
}

// Every scalar anywhere in an attestation file, inside the output
// included, changed in turn: the file is refused by Parse or by Verify.
func TestTamperEveryScalarInFile(t *testing.T) {
	file := mustMarshal(t, create(t, aliceKey, fullParams()))
	paths := scalarPaths(decodeNumbers(t, file), "")
	sort.Strings(paths)
	if len(paths) < 20 {
		t.Fatalf("only %d scalars found", len(paths))
	}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			b, err := json.Marshal(mutateAt(decodeNumbers(t, file), p))
			if err != nil {
				t.Fatal(err)
			}
			a, err := Parse(b)
			if err != nil {
				return
			}
			if err := a.Verify(); err == nil {
				t.Errorf("tampered file verifies:\n%s", b)
			}
		})
	}
}

func decodeNumbers(t *testing.T, b []byte) any {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func editJSON(t *testing.T, raw []byte, f func(v map[string]any)) json.RawMessage {
	v := decodeNumbers(t, raw).(map[string]any)
	f(v)
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func scalarPaths(v any, path string) []string {
	switch v := v.(type) {
	case map[string]any:
		var out []string
		for k, e := range v {
			out = append(out, scalarPaths(e, path+"/"+k)...)
		}
		return out
	case []any:
		var out []string
		for i, e := range v {
			out = append(out, scalarPaths(e, fmt.Sprintf("%s/%d", path, i))...)
		}
		return out
	}
	return []string{path}
}

func mutateAt(v any, path string) any {
	if path == "" {
		switch s := v.(type) {
		case string:
			if s == "" {
				return "x"
			}
			r := []byte(s)
			r[len(r)-1] ^= 1
			return string(r)
		case json.Number:
			if s == "0" {
				return json.Number("1")
			}
			return json.Number(string(s) + "1")
		case bool:
			return !s
		case nil:
			return false
		}
		panic(fmt.Sprintf("unexpected %T", v))
	}
	head, rest, _ := strings.Cut(path[1:], "/")
	if rest != "" {
		rest = "/" + rest
	}
	switch c := v.(type) {
	case map[string]any:
		c[head] = mutateAt(c[head], rest)
	case []any:
		var i int
		fmt.Sscan(head, &i)
		c[i] = mutateAt(c[i], rest)
	}
	return v
}
