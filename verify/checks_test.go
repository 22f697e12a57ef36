package verify

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// checkCase is one call of a built-in check: the output, the params, and
// "pass", "fail" or "error" (a *ParamsError).
type checkCase struct {
	name, output, params, want string
}

func runChecks(t *testing.T, check string, cases []checkCase) {
	t.Helper()
	fn, err := DefaultRegistry().Get(check)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		out, err := decodeValue([]byte(c.output))
		if err != nil {
			t.Fatalf("%s/%s: output: %v", check, c.name, err)
		}
		var params json.RawMessage
		if c.params != "" {
			params = json.RawMessage(c.params)
		}
		res, err := fn(out, params)
		got := "fail"
		switch {
		case err != nil:
			got = "error"
			if !errors.Is(err, ErrBadParams) {
				t.Errorf("%s/%s: error %v does not match ErrBadParams", check, c.name, err)
			}
		case res.Passed:
			got = "pass"
		}
		if got != c.want {
			t.Errorf("%s/%s: got %s (%+v, %v), want %s", check, c.name, got, res, err, c.want)
			continue
		}
		if err == nil {
			if want := map[bool]float64{true: 1, false: 0}[res.Passed]; scoreVal(res) != want {
				t.Errorf("%s/%s: score %v, want %v", check, c.name, scoreVal(res), want)
			}
			if !res.Passed && res.Details == "" {
				t.Errorf("%s/%s: a failure without details", check, c.name)
			}
		}
	}
}

// Params every built-in refuses.
func commonBadParams(valid string) []checkCase {
	return []checkCase{
		{"params absent", `"x"`, ``, "error"},
		{"params null", `"x"`, `null`, "error"},
		{"params array", `"x"`, `[]`, "error"},
		{"params string", `"x"`, `"a"`, "error"},
		{"params unknown member", `"x"`, strings.TrimSuffix(valid, "}") + `,"extra":1}`, "error"},
		{"params duplicate member", `"x"`, strings.TrimSuffix(valid, "}") + `,` + strings.TrimPrefix(valid, "{"), "error"},
		{"params recased member", `"x"`, `{"PATTERN":"a","FIELDS":["a"],"MIN":1,"EXPECTED":1,"SCHEMA":{}}`, "error"},
	}
}

func TestRegexMatch(t *testing.T) {
	cases := []checkCase{
		{"match", `"hello world"`, `{"pattern":"wor"}`, "pass"},
		{"no match", `"hello"`, `{"pattern":"^world"}`, "fail"},
		{"flags i", `"HELLO"`, `{"pattern":"^hello$","flags":"i"}`, "pass"},
		{"flags empty", `"hello"`, `{"pattern":"^hello$","flags":""}`, "pass"},
		{"flag g ignored", `"xhello"`, `{"pattern":"hello","flags":"g"}`, "pass"},
		{"flag y anchors", `"xhello"`, `{"pattern":"hello","flags":"y"}`, "fail"},
		{"flag y at start", `"hello"`, `{"pattern":"hel","flags":"y"}`, "pass"},
		{"field", `{"a":{"b":"v1.2.3"}}`, `{"pattern":"^v\\d+\\.\\d+\\.\\d+$","field":"a.b"}`, "pass"},
		{"field array index", `{"a":["x","yes"]}`, `{"pattern":"^yes$","field":"a.1"}`, "pass"},
		{"field missing", `{"a":{}}`, `{"pattern":".","field":"a.b"}`, "fail"},
		{"field not string", `{"a":5}`, `{"pattern":"5","field":"a"}`, "fail"},
		{"field null", `{"a":null}`, `{"pattern":"null","field":"a"}`, "fail"},
		{"output not string", `{"a":"x"}`, `{"pattern":"x"}`, "fail"},
		{"output number", `12`, `{"pattern":"12"}`, "fail"},
		{"pattern missing", `"x"`, `{"flags":"i"}`, "error"},
		{"pattern not string", `"x"`, `{"pattern":1}`, "error"},
		{"pattern invalid", `"x"`, `{"pattern":"("}`, "error"},
		{"pattern lookahead", `"x"`, `{"pattern":"x(?=y)"}`, "error"},
		{"pattern backreference", `"aa"`, `{"pattern":"(a)\\1"}`, "error"},
		{"pattern too long", `"x"`, `{"pattern":"` + strings.Repeat("x", MaxPatternLen+1) + `"}`, "error"},
		{"flag unknown", `"x"`, `{"pattern":"x","flags":"x"}`, "error"},
		{"flag repeated", `"x"`, `{"pattern":"x","flags":"ii"}`, "error"},
		{"flag v", `"x"`, `{"pattern":"x","flags":"v"}`, "error"},
		{"flags not string", `"x"`, `{"pattern":"x","flags":["i"]}`, "error"},
		{"field empty", `{"":"x"}`, `{"pattern":"x","field":""}`, "error"},
		{"field empty segment", `{"a":{"":"x"}}`, `{"pattern":"x","field":"a..b"}`, "error"},
		{"field not string", `"x"`, `{"pattern":"x","field":1}`, "error"},
		{"field null", `"x"`, `{"pattern":"x","field":null}`, "error"},
		{"astral input without u", `"😀"`, `{"pattern":"^.$"}`, "error"},
		{"astral input with u", `"😀"`, `{"pattern":"^.$","flags":"u"}`, "pass"},
		{"dot excludes CR", `"a\rb"`, `{"pattern":"^a.b$"}`, "fail"},
		{"JS whitespace", `"\u00a0"`, `{"pattern":"^\\s$"}`, "pass"},
	}
	runChecks(t, "regex_match", append(cases, commonBadParams(`{"pattern":"x"}`)...))
}

func TestJSONSchemaCheck(t *testing.T) {
	obj := `{"schema":{"type":"object","required":["n"],"properties":{"n":{"type":"integer","minimum":1}}}}`
	cases := []checkCase{
		{"valid", `{"n":3}`, obj, "pass"},
		{"valid 3.0 is an integer", `{"n":3.0}`, obj, "pass"},
		{"below minimum", `{"n":0}`, obj, "fail"},
		{"missing required", `{}`, obj, "fail"},
		{"wrong type", `{"n":"3"}`, obj, "fail"},
		{"not an object", `[1]`, obj, "fail"},
		{"true schema", `null`, `{"schema":true}`, "pass"},
		{"false schema", `null`, `{"schema":false}`, "fail"},
		{"big integer kept exact", `12345678901234567890123`, `{"schema":{"const":12345678901234567890123}}`, "pass"},
		{"big integer differs", `12345678901234567890124`, `{"schema":{"const":12345678901234567890123}}`, "fail"},
		{"schema missing", `1`, `{}`, "error"},
		{"schema null", `1`, `{"schema":null}`, "error"},
		{"schema not a schema", `1`, `{"schema":5}`, "error"},
		{"schema unknown keyword", `1`, `{"schema":{"minimun":1}}`, "error"},
		{"schema unknown format", `"x"`, `{"schema":{"format":"bogus"}}`, "error"},
		{"schema idn format", `"x"`, `{"schema":{"format":"idn-email"}}`, "error"},
		{"schema then without if", `"x"`, `{"schema":{"then":{}}}`, "error"},
		{"schema additionalItems ignored", `[]`, `{"schema":{"items":{},"additionalItems":false}}`, "error"},
		{"schema ref sibling", `1`, `{"schema":{"definitions":{"a":{}},"$ref":"#/definitions/a","minimum":5}}`, "error"},
		{"schema ref to file", `1`, `{"schema":{"$ref":"file:///etc/passwd"}}`, "error"},
		{"schema ref to URL", `1`, `{"schema":{"$ref":"http://127.0.0.1:1/s.json"}}`, "error"},
		{"schema relative ref", `1`, `{"schema":{"$ref":"other.json"}}`, "error"},
		{"schema nested ref to file", `{"a":1}`, `{"schema":{"properties":{"a":{"$ref":"file:///etc/hosts#"}}}}`, "error"},
		{"schema id then relative ref", `1`, `{"schema":{"$id":"http://example.com/root.json","items":{"$ref":"item.json"}}}`, "error"},
		{"schema other draft", `1`, `{"schema":{"$schema":"https://json-schema.org/draft/2020-12/schema"}}`, "error"},
		{"schema inner $schema", `1`, `{"schema":{"items":{"$schema":"http://json-schema.org/draft-07/schema#"}}}`, "error"},
		{"schema draft-07", `1`, `{"schema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"number"}}`, "pass"},
		{"schema internal ref", `[1]`, `{"schema":{"definitions":{"n":{"type":"number"}},"items":{"$ref":"#/definitions/n"}}}`, "pass"},
		{"schema id and internal ref", `[1]`, `{"schema":{"$id":"http://example.com/r.json","definitions":{"n":{"type":"string"}},"items":{"$ref":"#/definitions/n"}}}`, "fail"},
		{"schema recursive ref", `[[[]]]`, `{"schema":{"type":"array","items":{"$ref":"#"}}}`, "pass"},
		{"schema JS pattern", `{"a":"\u00a0"}`, `{"schema":{"properties":{"a":{"pattern":"^\\s$"}}}}`, "pass"},
		{"schema pattern lookahead", `"x"`, `{"schema":{"pattern":"(?=x)"}}`, "error"},
		{"schema patternProperties", `{"x-a":1}`, `{"schema":{"patternProperties":{"^x-":{"type":"string"}}}}`, "fail"},
		{"schema patternProperties JS class", `{"é":1}`, `{"schema":{"patternProperties":{"^[^\\s]$":{"type":"string"}}}}`, "fail"},
		{"schema patterns that translate alike", `{}`, `{"schema":{"patternProperties":{"\u0041":{},"A":{}}}}`, "error"},
	}
	runChecks(t, "json_schema", append(cases, commonBadParams(`{"schema":{}}`)...))
}

// TestSchemaNeverLoads: even a $ref that got past the walk cannot make
// the compiler read a file or the network.
func TestSchemaNeverLoads(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Write([]byte(`{"type":"string"}`))
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(file, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"file://" + file, srv.URL + "/s.json"} {
		doc := `{"items":{"$ref":"` + ref + `"}}`
		if _, err := compileSchema(json.RawMessage(doc)); err == nil {
			t.Errorf("compileSchema accepted %s", doc)
		}
		c := newCompiler()
		if err := c.AddResource(schemaURL, strings.NewReader(doc)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Compile(schemaURL); !errors.Is(err, errNoLoading) {
			t.Errorf("the compiler resolved %s: %v", ref, err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests reached the server", n)
	}
}

// TestSchemaDetailsQuoteThePattern: a failed pattern is reported as the
// schema wrote it, not as its Go translation.
func TestSchemaDetailsQuoteThePattern(t *testing.T) {
	s, err := compileSchema(json.RawMessage(`{"properties":{"a":{"pattern":"^\\s[^]$"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := decodeValue([]byte(`{"a":"xx"}`))
	res, err := validateSchema(s, out)
	if err != nil || res.Passed || !strings.Contains(res.Details, `'^\\s[^]$'`) {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestStringLength(t *testing.T) {
	cases := []checkCase{
		{"within", `"abc"`, `{"min":1,"max":3}`, "pass"},
		{"at min", `"a"`, `{"min":1}`, "pass"},
		{"below min", `""`, `{"min":1}`, "fail"},
		{"above max", `"abcd"`, `{"max":3}`, "fail"},
		{"max zero", `""`, `{"max":0}`, "pass"},
		{"UTF-16 units: emoji is 2", `"😀"`, `{"max":1}`, "fail"},
		{"UTF-16 units: emoji is 2 (min)", `"😀"`, `{"min":2,"max":2}`, "pass"},
		{"UTF-16 units: é is 1", `"é"`, `{"max":1}`, "pass"},
		{"field", `{"a":{"b":"xyz"}}`, `{"min":3,"field":"a.b"}`, "pass"},
		{"field missing", `{"a":{}}`, `{"min":0,"field":"a.b"}`, "fail"},
		{"not a string", `["abc"]`, `{"min":1}`, "fail"},
		{"null", `null`, `{"min":0}`, "fail"},
		{"no bounds", `"x"`, `{}`, "error"},
		{"only field", `"x"`, `{"field":"a"}`, "error"},
		{"min above max", `"x"`, `{"min":3,"max":2}`, "error"},
		{"negative", `"x"`, `{"min":-1}`, "error"},
		{"fraction", `"x"`, `{"min":1.5}`, "error"},
		{"string bound", `"x"`, `{"min":"1"}`, "error"},
		{"null bound", `"x"`, `{"min":null,"max":3}`, "error"},
		{"huge bound", `"x"`, `{"max":9007199254740992}`, "error"},
		{"bad field", `"x"`, `{"min":1,"field":"."}`, "error"},
	}
	runChecks(t, "string_length", append(cases, commonBadParams(`{"min":1}`)...))
}

func TestArrayLength(t *testing.T) {
	cases := []checkCase{
		{"within", `[1,2,3]`, `{"min":1,"max":3}`, "pass"},
		{"empty ok", `[]`, `{"max":0}`, "pass"},
		{"below min", `[]`, `{"min":1}`, "fail"},
		{"above max", `[1,2,3,4]`, `{"max":3}`, "fail"},
		{"field", `{"items":[1,2]}`, `{"min":2,"field":"items"}`, "pass"},
		{"field nested array", `{"a":[[1,2,3]]}`, `{"min":3,"field":"a.0"}`, "pass"},
		{"field missing", `{}`, `{"min":0,"field":"items"}`, "fail"},
		{"not an array", `{"0":1}`, `{"min":1}`, "fail"},
		{"string", `"abc"`, `{"min":1}`, "fail"},
		{"no bounds", `[]`, `{}`, "error"},
		{"min above max", `[]`, `{"min":2,"max":1}`, "error"},
		{"negative", `[]`, `{"max":-1}`, "error"},
	}
	runChecks(t, "array_length", append(cases, commonBadParams(`{"min":1}`)...))
}

func TestFieldExists(t *testing.T) {
	out := `{"a":{"b":1,"n":null,"arr":[{"c":true}]},"e":""}`
	cases := []checkCase{
		{"all present", out, `{"fields":["a","a.b","e"]}`, "pass"},
		{"null exists", out, `{"fields":["a.n"]}`, "pass"},
		{"array index", out, `{"fields":["a.arr.0.c"]}`, "pass"},
		{"array index out of range", out, `{"fields":["a.arr.1"]}`, "fail"},
		{"array index not canonical", out, `{"fields":["a.arr.00"]}`, "fail"},
		{"array length is not a member", out, `{"fields":["a.arr.length"]}`, "fail"},
		{"missing", out, `{"fields":["a","z"]}`, "fail"},
		{"through null", out, `{"fields":["a.n.x"]}`, "fail"},
		{"through scalar", out, `{"fields":["a.b.c"]}`, "fail"},
		{"inherited names are not members", out, `{"fields":["constructor"]}`, "fail"},
		{"scalar output", `5`, `{"fields":["a"]}`, "fail"},
		{"fields empty", out, `{"fields":[]}`, "error"},
		{"fields missing", out, `{}`, "error"},
		{"fields not strings", out, `{"fields":[1]}`, "error"},
		{"fields not array", out, `{"fields":"a"}`, "error"},
		{"path empty", out, `{"fields":[""]}`, "error"},
		{"path trailing dot", out, `{"fields":["a."]}`, "error"},
		{"path too long", out, `{"fields":["` + strings.Repeat("a", MaxPathLen+1) + `"]}`, "error"},
		{"path too many segments", out, `{"fields":["` + strings.Repeat("a.", MaxPathSegments) + `a"]}`, "error"},
		{"too many fields", out, `{"fields":[` + strings.Repeat(`"a",`, MaxFields) + `"a"]}`, "error"},
	}
	runChecks(t, "field_exists", append(cases, commonBadParams(`{"fields":["a"]}`)...))
}

func TestExitCode(t *testing.T) {
	cases := []checkCase{
		{"equal", `{"exitCode":0}`, `{"expected":0}`, "pass"},
		{"equal with other members", `{"exitCode":2,"stdout":"x"}`, `{"expected":2}`, "pass"},
		{"equal written differently", `{"exitCode":1.0}`, `{"expected":1}`, "pass"},
		{"negative zero", `{"exitCode":-0}`, `{"expected":0}`, "pass"},
		{"exponent form", `{"exitCode":1e1}`, `{"expected":10}`, "pass"},
		{"different", `{"exitCode":1}`, `{"expected":0}`, "fail"},
		{"close but not equal", `{"exitCode":0.0000001}`, `{"expected":0}`, "fail"},
		{"string exit code", `{"exitCode":"0"}`, `{"expected":0}`, "fail"},
		{"null exit code", `{"exitCode":null}`, `{"expected":0}`, "fail"},
		{"missing", `{"code":0}`, `{"expected":0}`, "fail"},
		{"not an object", `0`, `{"expected":0}`, "fail"},
		{"array", `[{"exitCode":0}]`, `{"expected":0}`, "fail"},
		{"expected missing", `{"exitCode":0}`, `{}`, "error"},
		{"expected string", `{"exitCode":0}`, `{"expected":"0"}`, "error"},
		{"expected fraction", `{"exitCode":0}`, `{"expected":0.5}`, "error"},
		{"expected null", `{"exitCode":0}`, `{"expected":null}`, "error"},
		{"expected unsafe", `{"exitCode":0}`, `{"expected":9007199254740993}`, "error"},
	}
	runChecks(t, "exit_code", append(cases, commonBadParams(`{"expected":0}`)...))
}

func TestOutputEquals(t *testing.T) {
	cases := []checkCase{
		{"equal", `{"a":[1,"x",null,true]}`, `{"expected":{"a":[1,"x",null,true]}}`, "pass"},
		{"member order", `{"b":1,"a":2}`, `{"expected":{"a":2,"b":1}}`, "pass"},
		{"number forms", `[1.0,1e2,-0,0.10]`, `{"expected":[1,100,0,0.1]}`, "pass"},
		{"string escapes", `"\u0041\n"`, `{"expected":"A\n"}`, "pass"},
		{"null", `null`, `{"expected":null}`, "pass"},
		{"different value", `{"a":1}`, `{"expected":{"a":2}}`, "fail"},
		{"extra member", `{"a":1,"b":2}`, `{"expected":{"a":1}}`, "fail"},
		{"array order", `[1,2]`, `{"expected":[2,1]}`, "fail"},
		{"type", `"1"`, `{"expected":1}`, "fail"},
		{"null vs missing", `{"a":null}`, `{"expected":{}}`, "fail"},
		{"beyond double precision", `9007199254740993`, `{"expected":9007199254740992}`, "fail"},
		{"beyond double precision nested", `{"a":[0.30000000000000000001]}`, `{"expected":{"a":[0.3]}}`, "fail"},
		{"expected missing", `1`, `{}`, "error"},
		{"expected huge", `1`, `{"expected":1e999}`, "error"},
		{"expected duplicate member", `1`, `{"expected":{"a":1,"a":1}}`, "error"},
	}
	bad := commonBadParams(`{"expected":1}`)
	runChecks(t, "output_equals", append(cases, bad...))
}

func TestRegistry(t *testing.T) {
	r := DefaultRegistry()
	want := []string{"array_length", "exit_code", "field_exists", "json_schema", "output_equals", "regex_match", "string_length"}
	if got := r.List(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("List() = %v", got)
	}
	c := &counter{}
	if err := r.Register("regex_match", c.fn); !errors.Is(err, ErrDuplicateCheck) {
		t.Errorf("replacing a built-in: %v", err)
	}
	for _, name := range []string{"", "a b", "é", strings.Repeat("a", MaxCheckNameLen+1)} {
		if err := r.Register(name, c.fn); err == nil {
			t.Errorf("Register(%q) accepted", name)
		}
	}
	if err := r.Register("nilfn", nil); err == nil {
		t.Error("Register of a nil function accepted")
	}
	if err := r.Register("my.check", c.fn); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get("my.check"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get("nope"); !errors.Is(err, ErrUnknownCheck) {
		t.Errorf("Get(nope) = %v", err)
	}
	if _, err := NewRegistry().Get("regex_match"); !errors.Is(err, ErrUnknownCheck) {
		t.Error("NewRegistry is not empty")
	}
	// DefaultRegistry hands out a fresh registry each time.
	if _, err := DefaultRegistry().Get("my.check"); err == nil {
		t.Error("a registration leaked into another DefaultRegistry")
	}
}
