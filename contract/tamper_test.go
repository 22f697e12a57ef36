package contract

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

// tamperCase changes one signed field of the standard contract to another
// well-formed value; only the signature can refuse the result.
type tamperCase struct {
	field  string // the JSON path of the field it changes, for the coverage check
	name   string
	mutate func(t *testing.T, c *TaskContract)
	want   error // default ErrInvalidSignature
}

func tamperCases() []tamperCase {
	var cs []tamperCase
	add := func(field, name string, want error, m func(*testing.T, *TaskContract)) {
		cs = append(cs, tamperCase{field: field, name: name, mutate: m, want: want})
	}
	set := func(field, name string, m func(*TaskContract)) {
		add(field, name, nil, func(_ *testing.T, c *TaskContract) { m(c) })
	}
	// edit changes a member of a free-form value.
	edit := func(field, name string, get func(*TaskContract) *json.RawMessage, f func(map[string]any)) {
		add(field, name, nil, func(t *testing.T, c *TaskContract) {
			v := get(c)
			*v = editJSON(t, *v, f)
		})
	}
	inputs := func(c *TaskContract) *json.RawMessage { return &c.Task.Inputs }
	schema := func(c *TaskContract) *json.RawMessage { return &c.Task.OutputSchema }
	verification := func(c *TaskContract) *json.RawMessage { return &c.Verification }
	obj := func(v any) map[string]any { return v.(map[string]any) }

	set("id", "another valid id", func(c *TaskContract) { c.ID = "ct_a1b2c3d4e5f7" })
	add("version", "0.2", ErrMalformed, func(_ *testing.T, c *TaskContract) { c.Version = "0.2" })
	set("issuer", "another principal", func(c *TaskContract) { c.Issuer = evilKey.ID() })
	add("issuer", "the same principal as did:key", ErrMalformed, func(_ *testing.T, c *TaskContract) { c.Issuer = rootKey.DID() })
	set("createdAt", "later", func(c *TaskContract) { c.CreatedAt = "2026-01-01T00:00:00.001Z" })
	set("createdAt", "same instant written differently", func(c *TaskContract) { c.CreatedAt = "2026-01-01T00:00:00Z" })
	set("task.title", "changed", func(c *TaskContract) { c.Task.Title = "Summarise the literature" })
	set("task.title", "trailing space", func(c *TaskContract) { c.Task.Title += " " })
	set("task.description", "changed", func(c *TaskContract) { c.Task.Description = "Do nothing." })
	set("task.description", "emptied", func(c *TaskContract) { c.Task.Description = "" })

	edit("task.inputs", "string member", inputs, func(v map[string]any) { v["query"] = "quantum computers" })
	edit("task.inputs", "nested integer", inputs, func(v map[string]any) { obj(v["limits"])["n"] = json.Number("11") })
	edit("task.inputs", "nested fraction", inputs, func(v map[string]any) { obj(v["limits"])["ratio"] = json.Number("0.2") })
	edit("task.inputs", "nested array reordered", inputs, func(v map[string]any) { obj(v["limits"])["tags"] = []any{"b", "a"} })
	edit("task.inputs", "nested array element added", inputs, func(v map[string]any) { obj(v["limits"])["tags"] = []any{"a", "b", "c"} })
	edit("task.inputs", "boolean", inputs, func(v map[string]any) { v["flag"] = false })
	edit("task.inputs", "null to false", inputs, func(v map[string]any) { v["none"] = false })
	edit("task.inputs", "member removed", inputs, func(v map[string]any) { delete(v, "none") })
	edit("task.inputs", "member added", inputs, func(v map[string]any) { v["extra"] = json.Number("1") })
	edit("task.inputs", "member renamed by case", inputs, func(v map[string]any) { v["Query"] = v["query"]; delete(v, "query") })
	set("task.inputs", "emptied", func(c *TaskContract) { c.Task.Inputs = json.RawMessage(`{}`) })

	edit("task.outputSchema", "required emptied", schema, func(v map[string]any) { v["required"] = []any{} })
	edit("task.outputSchema", "nested maxLength raised", schema, func(v map[string]any) {
		obj(obj(v["properties"])["summary"])["maxLength"] = json.Number("2001")
	})
	edit("task.outputSchema", "nested minimum lowered", schema, func(v map[string]any) {
		obj(obj(v["properties"])["score"])["minimum"] = json.Number("0.4")
	})
	edit("task.outputSchema", "nested type changed", schema, func(v map[string]any) {
		obj(obj(v["properties"])["summary"])["type"] = "array"
	})
	edit("task.outputSchema", "additionalProperties added", schema, func(v map[string]any) { v["additionalProperties"] = true })

	edit("verification", "mode", verification, func(v map[string]any) { v["mode"] = "majority" })
	edit("verification", "steps reordered", verification, func(v map[string]any) {
		s := v["steps"].([]any)
		s[0], s[1] = s[1], s[0]
	})
	edit("verification", "step removed", verification, func(v map[string]any) { v["steps"] = v["steps"].([]any)[1:] })
	edit("verification", "nested check parameter", verification, func(v map[string]any) {
		obj(obj(v["steps"].([]any)[0])["checkParams"])["min"] = json.Number("1")
	})
	edit("verification", "nested check name", verification, func(v map[string]any) {
		obj(v["steps"].([]any)[0])["checkName"] = "array_length"
	})
	set("verification", "replaced by a schema match", func(c *TaskContract) {
		c.Verification = json.RawMessage(`{"method":"schema_match","schema":{"type":"object"}}`)
	})

	set("constraints.maxBudgetMicrocents", "raised", func(c *TaskContract) { c.Constraints.MaxBudgetMicrocents = 5001 })
	set("constraints.maxBudgetMicrocents", "to 0", func(c *TaskContract) { c.Constraints.MaxBudgetMicrocents = 0 })
	set("constraints.deadline", "later", func(c *TaskContract) { c.Constraints.Deadline = "2026-01-03T00:00:00.000Z" })
	set("constraints.deadline", "same instant written differently", func(c *TaskContract) { c.Constraints.Deadline = "2026-01-02T01:00:00+01:00" })
	set("constraints.maxChainDepth", "raised", func(c *TaskContract) { c.Constraints.MaxChainDepth = 3 })
	set("constraints.maxChainDepth", "to 0", func(c *TaskContract) { c.Constraints.MaxChainDepth = 0 })
	set("constraints.requiredCapabilities", "one removed", func(c *TaskContract) { c.Constraints.RequiredCapabilities = []string{"docs:read"} })
	set("constraints.requiredCapabilities", "one added", func(c *TaskContract) {
		c.Constraints.RequiredCapabilities = append(c.Constraints.RequiredCapabilities, "web:fetch")
	})
	set("constraints.requiredCapabilities", "reordered", func(c *TaskContract) {
		c.Constraints.RequiredCapabilities = []string{"web:search", "docs:read"}
	})
	set("constraints.requiredCapabilities", "emptied", func(c *TaskContract) { c.Constraints.RequiredCapabilities = []string{} })

	set("signature", "another contract's signature", func(c *TaskContract) {
		p := testParams()
		p.ID = "ct_000000000000"
		other, err := Create(rootKey, p, t0)
		if err != nil {
			panic(err)
		}
		c.Signature = other.Signature
	})
	set("signature", "one bit flipped", func(c *TaskContract) {
		b := []byte(c.Signature)
		b[10] ^= 'A' ^ 'B'
		c.Signature = string(b)
	})
	set("signature", "signed by another key", func(c *TaskContract) {
		other, err := Create(evilKey, testParams(), t0)
		if err != nil {
			panic(err)
		}
		c.Signature = other.Signature
	})
	set("signature", "the same bytes signed by another key", func(c *TaskContract) {
		payload, err := c.signedPayload()
		if err != nil {
			panic(err)
		}
		c.Signature = sig.SignCanonical(evilKey.PrivateKey(), payload)
	})
	return cs
}

func TestTamper(t *testing.T) {
	orig := testContract(t)
	origBytes := mustMarshal(t, orig)
	for _, tc := range tamperCases() {
		t.Run(tc.field+"/"+tc.name, func(t *testing.T) {
			c, err := Parse(origBytes)
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(t, c)
			if reflect.DeepEqual(c, orig) {
				t.Fatal("the change changed nothing")
			}
			want := tc.want
			if want == nil {
				want = ErrInvalidSignature
			}
			if err := c.Verify(); !errors.Is(err, want) {
				t.Errorf("Verify: got %v, want %v", err, want)
			}
			// The tampered contract written out and read back fails too.
			b, err := c.canonical()
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

// Every field of a contract has at least one tamper case.
func TestTamperCoverage(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range tamperCases() {
		covered[tc.field] = true
	}
	var missing []string
	for _, f := range jsonLeaves(reflect.TypeFor[TaskContract](), "") {
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

// jsonLeaves lists the JSON paths of the fields of a struct type, down to
// fields that are not structs. Free-form members (json.RawMessage) and
// slices are leaves.
func jsonLeaves(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		if f.Type.Kind() == reflect.Struct {
			out = append(out, jsonLeaves(f.Type, prefix+name+".")...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
}

// Every scalar anywhere in a contract file, nested members of the
// free-form values included, changed in turn: the file is refused by Parse
// or by Verify.
func TestTamperEveryScalarInFile(t *testing.T) {
	file := mustMarshal(t, testContract(t))
	var doc any
	dec := json.NewDecoder(strings.NewReader(string(file)))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	paths := scalarPaths(doc, "")
	sort.Strings(paths)
	if len(paths) < 30 {
		t.Fatalf("only %d scalars found", len(paths))
	}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			var d any
			dec := json.NewDecoder(strings.NewReader(string(file)))
			dec.UseNumber()
			if err := dec.Decode(&d); err != nil {
				t.Fatal(err)
			}
			d = mutateAt(d, p)
			b, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			c, err := Parse(b)
			if err != nil {
				return
			}
			if err := c.Verify(); err == nil {
				t.Errorf("tampered file verifies:\n%s", b)
			}
		})
	}
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

// mutateAt changes the scalar at a path made by scalarPaths.
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
