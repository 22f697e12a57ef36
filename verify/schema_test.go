package verify

import (
	"encoding/json"
	"os"
	"testing"
)

// schemaRefusals are the vectors ajv compiles that compileSchema refuses on
// purpose, keyed by the schema's JSON.
var schemaRefusals = map[string]string{
	`{"pattern":"(?=a)","type":"string"}`: "lookahead is not supported by Go's regexp",
}

// schemaDifferences are the verdicts that differ from ajv's on purpose,
// keyed by schema and instance.
var schemaDifferences = map[string]string{
	`{"multipleOf":0.01,"type":"number"} 0.07`:   "v5 divides exactly; ajv divides doubles (0.07/0.01 = 7.000000000000001)",
	`{"format":"regex","type":"string"} "(?=a)"`: "a regex Go cannot run is not a valid regex here (stricter)",
}

type schemaVector struct {
	Schema   json.RawMessage `json:"schema"`
	Instance json.RawMessage `json:"instance"`
	Result   any             `json:"result"` // true, false or "compile_error"
}

// TestSchemaVectors holds compileSchema and validateSchema to what ajv 8 in
// strict mode with ajv-formats answers (testdata/schema_vectors.json): a
// schema ajv refuses is refused, and every instance of a schema both
// compile gets the same verdict.
func TestSchemaVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/schema_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors []schemaVector
	if err := json.Unmarshal(b, &vectors); err != nil {
		t.Fatal(err)
	}
	for _, v := range vectors {
		key := compact(v.Schema)
		var canonKey map[string]any
		if json.Unmarshal(v.Schema, &canonKey) == nil {
			kb, _ := json.Marshal(canonKey)
			key = string(kb)
		}
		s, err := compileSchema(v.Schema)
		if v.Result == "compile_error" {
			if err == nil {
				t.Errorf("schema %s: ajv refuses it, compileSchema does not", v.Schema)
			}
			continue
		}
		if err != nil {
			if schemaRefusals[key] == "" {
				t.Errorf("schema %s: ajv compiles it, compileSchema refuses: %v", v.Schema, err)
			}
			continue
		}
		inst, err := decodeValue(v.Instance)
		if err != nil {
			t.Fatal(err)
		}
		res, err := validateSchema(s, inst)
		if err != nil {
			t.Errorf("schema %s instance %s: %v", v.Schema, v.Instance, err)
			continue
		}
		if res.Passed != v.Result && schemaDifferences[key+" "+compact(v.Instance)] == "" {
			t.Errorf("schema %s instance %s: ajv %v, validateSchema %v (%s)", v.Schema, v.Instance, v.Result, res.Passed, res.Details)
		}
	}
}
