package verify

import (
	"encoding/json"
	"os"
	"testing"
)

// regexRefusals are the vectors where JavaScript answers but the
// translation refuses on purpose (doc.go): identity escapes of letters,
// astral characters or case-folding differences without the u flag,
// backreferences, lookaround, Go's repeat limit, unsupported properties.
var regexRefusals = map[string]string{
	`\a/`:               "identity escape of a letter",
	`\e/`:               "identity escape of a letter",
	`\z/`:               "identity escape of a letter",
	`\A/`:               "identity escape of a letter",
	`\k/`:               "identity escape of a letter",
	`\Qa\E/`:            "identity escape of a letter",
	`\u{41}/`:           "identity escape of a letter (no u flag)",
	`\p{L}/`:            "identity escape of a letter (no u flag)",
	`\ud83d/`:           "lone surrogate",
	`\ud83d\ude00/`:     "astral character without the u flag",
	`(?=a)/`:            "lookaround",
	`(?!a)/`:            "lookaround",
	`(?<=a)b/`:          "lookaround",
	`(?<!a)b/`:          "lookaround",
	`(a)\1/`:            "backreference",
	`(?<n>a)\k<n>/`:     "backreference",
	`x{1001}/`:          "Go's repeat limit",
	`\p{Letter}/u`:      "long property name",
	`θ/i`:               "legacy case folding",
	`ſ/i`:               "legacy case folding",
	`ß/i`:               "legacy case folding",
	`[\u0100-\u0200]/i`: "legacy case folding",
	`k/i`:               "legacy case folding",
	`s/i`:               "legacy case folding",
	`a.b/`:              "astral input without the u flag",
	`^.$/`:              "astral input without the u flag",
	`^abc$/m`:           "line terminator other than \n with the m flag",
	`^b/m`:              "line terminator other than \n with the m flag",
	`a/v`:               "v flag",
}

type regexVector struct {
	Pattern string `json:"pattern"`
	Flags   string `json:"flags"`
	Input   string `json:"input"`
	Result  any    `json:"result"` // true, false or "error"
}

// TestRegexVectors holds the translation to what JavaScript (Node.js 20)
// answers for each vector in testdata/regex_vectors.json: the same answer,
// or, for a vector listed in regexRefusals with a reason, an error. A
// JavaScript error must always be an error.
func TestRegexVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/regex_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors []regexVector
	if err := json.Unmarshal(b, &vectors); err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, v := range vectors {
		re, err := compileJSRegex(v.Pattern, v.Flags)
		var got any
		if err == nil {
			var ok bool
			ok, err = re.test(v.Input)
			got = ok
		}
		if err != nil {
			got = "error"
		}
		if got == v.Result {
			continue
		}
		if got == "error" && regexRefusals[v.Pattern+"/"+v.Flags] != "" {
			refused++
			continue
		}
		t.Errorf("new RegExp(%q, %q).test(%q): JavaScript %v, translation %v (err %v)", v.Pattern, v.Flags, v.Input, v.Result, got, err)
	}
	if refused == 0 || refused > len(vectors)/4 {
		t.Errorf("%d of %d vectors refused", refused, len(vectors))
	}
}
