package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/delegateos/delegateos/internal/sig"
)

func TestParseRoundTrip(t *testing.T) {
	c := testContract(t)
	b := mustMarshal(t, c)
	for _, form := range [][]byte{b, indent(t, b), append(append([]byte(" \n"), b...), "\n\t "...)} {
		back, err := Parse(form)
		if err != nil {
			t.Fatalf("%s: %v", form, err)
		}
		if err := back.Verify(); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Errorf("round trip changed the contract:\n%+v\n%+v", back, c)
		}
		if again := mustMarshal(t, back); !bytes.Equal(again, b) {
			t.Errorf("Marshal is not stable:\n%s\n%s", again, b)
		}
	}
}

// Marshal writes the canonical form, and the signature covers the
// canonical form of the contract without its signature, as any RFC 8785
// implementation computes it.
func TestSignedBytesAreCanonical(t *testing.T) {
	c := testContract(t)
	b := mustMarshal(t, c)
	canonical, err := jcs.Transform(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, canonical) {
		t.Errorf("Marshal is not canonical:\n%s\n%s", b, canonical)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "signature")
	unsigned, _ := json.Marshal(m)
	payload, err := jcs.Transform(unsigned)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := sig.DecodeSignature(c.Signature)
	if err := sig.VerifyDigest(rootKey.Public(), sig.Digest(payload), raw); err != nil {
		t.Errorf("signature does not cover the independently canonicalized payload: %v", err)
	}
}

// Numbers in free-form members are read as doubles, as RFC 8785 defines
// them: each spelling below is signed as its canonical form, so a file
// that spells the value either way verifies, and the parsed contract holds
// the canonical spelling.
func TestFreeFormNumbers(t *testing.T) {
	tests := []struct{ written, canonical string }{
		{"0.1", "0.1"},
		{"-0", "0"},
		{"-0.0", "0"},
		{"1E3", "1000"},
		{"1e3", "1000"},
		{"1000.000", "1000"},
		{"1e21", "1e+21"},
		{"1e22", "1e+22"},
		{"0.000001", "0.000001"},
		{"1e-7", "1e-7"},
		{"9007199254740991", "9007199254740991"},
		{"-9007199254740991", "-9007199254740991"},
		{"9007199254740991.0", "9007199254740991"},
		{"1.5e15", "1500000000000000"},
		{"1.7976931348623157e308", "1.7976931348623157e+308"},
		{"5e-324", "5e-324"},
	}
	for _, tt := range tests {
		t.Run(tt.written, func(t *testing.T) {
			p := testParams()
			p.Inputs = json.RawMessage(`{"x":` + tt.written + `}`)
			c, err := Create(rootKey, p, t0)
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"x":` + tt.canonical + `}`; string(c.Task.Inputs) != want {
				t.Errorf("inputs %s, want %s", c.Task.Inputs, want)
			}
			// Spell it as written in a pretty-printed file: same signature.
			file := bytes.Replace(indent(t, mustMarshal(t, c)), []byte(`"x": `+tt.canonical), []byte(`"x": `+tt.written), 1)
			if !bytes.Contains(file, []byte(tt.written)) {
				t.Fatalf("could not respell the number in\n%s", file)
			}
			back, err := Parse(file)
			if err != nil {
				t.Fatal(err)
			}
			if err := back.Verify(); err != nil {
				t.Errorf("%s: %v", file, err)
			}
			if string(back.Task.Inputs) != string(c.Task.Inputs) {
				t.Errorf("parsed inputs %s, want %s", back.Task.Inputs, c.Task.Inputs)
			}
		})
	}
}

// A number no double holds, or an integer literal a reader with exact
// integers would read differently from its canonical form, is refused
// wherever it appears in a contract file.
func TestFreeFormNumbersRefused(t *testing.T) {
	good := string(mustMarshal(t, testContract(t)))
	for _, n := range []string{"1e400", "-1e400", "1E309", "9007199254740992", "-9007199254740992", "12345678901234567890", "123456789012345678901234567890",
		// Float literals whose canonical form is an integer literal of 2^53 or more.
		"1e20", "9007199254740993.0", "9.007199254740992e15", "-1e16"} {
		for _, where := range []struct{ old, new string }{
			{`"n":10`, `"n":` + n},
			{`"minimum":0.5`, `"minimum":` + n},
			{`"max":2000`, `"max":` + n},
		} {
			file := strings.Replace(good, where.old, where.new, 1)
			if file == good {
				t.Fatalf("%s not found", where.old)
			}
			if _, err := Parse([]byte(file)); !errors.Is(err, ErrMalformed) {
				t.Errorf("%s: got %v, want ErrMalformed", where.new, err)
			}
		}
	}
}

func TestParseRefuses(t *testing.T) {
	c := testContract(t)
	good := string(mustMarshal(t, c))
	replace := func(old, new string) string {
		s := strings.Replace(good, old, new, 1)
		if s == good {
			t.Fatalf("%q not in %s", old, good)
		}
		return s
	}
	tests := []struct{ name, data string }{
		{"empty", ""},
		{"not an object", `[]`},
		{"null", `null`},
		{"trailing data", good + "{}"},
		{"duplicate member", replace(`{"constraints":`, `{"id":"ct_a1b2c3d4e5f6","constraints":`)},
		{"duplicate nested in inputs", replace(`"flag":true`, `"flag":true,"flag":false`)},
		{"duplicate nested in schema", replace(`"required":["summary"]`, `"required":["summary"],"required":[]`)},
		{"duplicate nested in verification", replace(`"mode":"all_pass"`, `"mode":"all_pass","mode":"majority"`)},
		{"re-cased member", replace(`"issuer":`, `"Issuer":`)},
		{"re-cased nested member", replace(`"maxChainDepth":`, `"MaxChainDepth":`)},
		{"unknown member", replace(`{"constraints":`, `{"extra":1,"constraints":`)},
		{"unknown task member", replace(`"title":`, `"priority":1,"title":`)},
		{"unknown constraints member", replace(`"deadline":`, `"maxTokens":1,"deadline":`)},
		{"invalid UTF-8", replace(`Summarize`, "Summ\xffarize")},
		{"lone surrogate", replace(`Summarize`, `Summ\udc00arize`)},
		{"nested too deep", replace(`"flag":true`, `"flag":`+strings.Repeat("[", MaxValueDepth+1)+strings.Repeat("]", MaxValueDepth+1))},
		{"version", replace(`"version":"0.1"`, `"version":"0.2"`)},
		{"id upper case", replace(`"id":"ct_a1b2c3d4e5f6"`, `"id":"ct_A1B2C3D4E5F6"`)},
		{"id short", replace(`"id":"ct_a1b2c3d4e5f6"`, `"id":"ct_a1b2c3d4e5f"`)},
		{"issuer did:key", replace(rootKey.ID(), rootKey.DID())},
		{"issuer short", replace(rootKey.ID(), rootKey.ID()[:40])},
		{"createdAt not a time", replace(`"createdAt":"2026-01-01T00:00:00.000Z"`, `"createdAt":"yesterday"`)},
		{"createdAt too long", replace(`"createdAt":"2026-01-01T00:00:00.000Z"`, `"createdAt":"2026-01-01T00:00:00.`+strings.Repeat("0", 60)+`Z"`)},
		{"deadline before createdAt", replace(`"deadline":"2026-01-02T00:00:00.000Z"`, `"deadline":"2025-12-31T00:00:00.000Z"`)},
		{"deadline equals createdAt", replace(`"deadline":"2026-01-02T00:00:00.000Z"`, `"deadline":"2026-01-01T00:00:00Z"`)},
		{"budget negative", replace(`"maxBudgetMicrocents":5000`, `"maxBudgetMicrocents":-1`)},
		{"budget 2^53", replace(`"maxBudgetMicrocents":5000`, `"maxBudgetMicrocents":9007199254740992`)},
		{"budget fraction", replace(`"maxBudgetMicrocents":5000`, `"maxBudgetMicrocents":5000.5`)},
		{"budget exponent", replace(`"maxBudgetMicrocents":5000`, `"maxBudgetMicrocents":5e3`)},
		{"budget string", replace(`"maxBudgetMicrocents":5000`, `"maxBudgetMicrocents":"5000"`)},
		{"depth negative", replace(`"maxChainDepth":2`, `"maxChainDepth":-2`)},
		{"inputs missing", replace(`"inputs":`+string(c.Task.Inputs)+`,`, ``)},
		{"inputs null", replace(`"inputs":`+string(c.Task.Inputs), `"inputs":null`)},
		{"inputs array", replace(`"inputs":`+string(c.Task.Inputs), `"inputs":[]`)},
		{"inputs string", replace(`"inputs":`+string(c.Task.Inputs), `"inputs":"{}"`)},
		{"schema missing", replace(`,"outputSchema":`+string(c.Task.OutputSchema), ``)},
		{"schema true", replace(`"outputSchema":`+string(c.Task.OutputSchema), `"outputSchema":true`)},
		{"verification missing", replace(`"verification":`+string(c.Verification)+`,`, ``)},
		{"verification method unknown", replace(`"method":"composite"`, `"method":"vibes"`)},
		{"requiredCapabilities missing", replace(`,"requiredCapabilities":["docs:read","web:search"]`, ``)},
		{"requiredCapabilities null", replace(`"requiredCapabilities":["docs:read","web:search"]`, `"requiredCapabilities":null`)},
		{"requiredCapabilities malformed", replace(`"docs:read"`, `"docs-read"`)},
		{"requiredCapabilities twice", replace(`"web:search"`, `"docs:read"`)},
		{"title empty", replace(`"title":"Summarize the literature"`, `"title":""`)},
		{"description null", replace(`"description":"Read the papers in /project/papers and summarize them."`, `"description":null`)},
		{"title null", replace(`"title":"Summarize the literature"`, `"title":null`)},
		{"depth null", replace(`"maxChainDepth":2`, `"maxChainDepth":null`)},
		{"budget null", replace(`"maxBudgetMicrocents":5000`, `"maxBudgetMicrocents":null`)},
		{"task null", replace(`"task":{`, `"task":null,"x":{`)},
		{"requirement null", replace(`"docs:read"`, `null`)},
		{"version null", replace(`"version":"0.1"`, `"version":null`)},
		{"signature null", replace(`"signature":"`+c.Signature+`"`, `"signature":null`)},
		{"signature missing", replace(`,"signature":"`+c.Signature+`"`, ``)},
		{"signature empty", replace(c.Signature, ``)},
		{"signature not base64url", replace(c.Signature, "+"+c.Signature[1:])},
		{"signature short", replace(c.Signature, c.Signature[:80])},
		{"signature padded", replace(c.Signature, c.Signature+"==")},
		{"over the size limit", replace(`"Read the papers`, `"`+strings.Repeat(" ", MaxContractSize)+`Read the papers`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse([]byte(tt.data)); !errors.Is(err, ErrMalformed) {
				t.Errorf("got %v, want ErrMalformed", err)
			}
		})
	}
}

// Equivalent spellings of strings are one signed contract, and the parsed
// contract holds the canonical spelling.
func TestParseEscapes(t *testing.T) {
	p := testParams()
	p.Inputs = json.RawMessage(`{"city":"Zürich","path":"/a/b","emoji":"😀"}`)
	c, err := Create(rootKey, p, t0)
	if err != nil {
		t.Fatal(err)
	}
	file := strings.NewReplacer(`Zürich`, `Z\u00fcrich`, `/a/b`, `\/a\/b`, `😀`, `\ud83d\ude00`).Replace(string(mustMarshal(t, c)))
	back, err := Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("parsed %s, want %s", back.Task.Inputs, c.Task.Inputs)
	}
}
