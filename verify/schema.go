package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// schemaURL is the base URL a schema is compiled under. Nothing is ever
// loaded from it or from anywhere else.
const schemaURL = "mem:///verify/schema.json"

// draft07 is the one $schema accepted (ajv's default meta-schema).
const draft07 = "http://json-schema.org/draft-07/schema"

// draft07Keywords are the keywords of JSON Schema draft-07. Any other member
// of a schema object is an error, as in ajv's strict mode (strictSchema).
var draft07Keywords = map[string]bool{
	"$schema": true, "$id": true, "$ref": true, "$comment": true,
	"title": true, "description": true, "default": true, "readOnly": true,
	"writeOnly": true, "examples": true,
	"multipleOf": true, "maximum": true, "exclusiveMaximum": true,
	"minimum": true, "exclusiveMinimum": true,
	"maxLength": true, "minLength": true, "pattern": true,
	"additionalItems": true, "items": true, "maxItems": true,
	"minItems": true, "uniqueItems": true, "contains": true,
	"maxProperties": true, "minProperties": true, "required": true,
	"additionalProperties": true, "definitions": true, "properties": true,
	"patternProperties": true, "dependencies": true, "propertyNames": true,
	"const": true, "enum": true, "type": true, "format": true,
	"contentMediaType": true, "contentEncoding": true,
	"if": true, "then": true, "else": true,
	"allOf": true, "anyOf": true, "oneOf": true, "not": true,
}

// refSiblings are the keywords allowed beside $ref. Draft-07 ignores every
// keyword beside $ref (and so does jsonschema/v5), while ajv applies them;
// a validation keyword there would be checked by one and not the other.
// Annotations and definitions may stay.
var refSiblings = map[string]bool{
	"$ref": true, "$comment": true, "title": true, "description": true,
	"default": true, "examples": true, "readOnly": true, "writeOnly": true,
	"definitions": true, // holds schemas, validates nothing itself
}

// draft07Formats are the formats draft-07 defines that jsonschema/v5
// asserts. An unknown format is an error (ajv strict mode); idn-email and
// idn-hostname are refused because v5 would ignore them.
var draft07Formats = map[string]bool{
	"date-time": true, "date": true, "time": true, "email": true,
	"hostname": true, "ipv4": true, "ipv6": true, "uri": true,
	"uri-reference": true, "iri": true, "iri-reference": true,
	"uri-template": true, "json-pointer": true,
	"relative-json-pointer": true, "regex": true,
}

// errNoLoading is what the compiler's loader returns for every URL.
var errNoLoading = errors.New("schemas are never loaded from outside the spec")

// compileSchema checks a draft-07 schema and compiles it. The schema is
// decoded with decodeValue's bounds, walked to refuse what ajv's strict
// mode refuses and every $ref that is not a fragment of the schema itself,
// its ECMAScript patterns are translated to Go syntax (with the u flag, as
// ajv compiles them), and the result is compiled with a loader that refuses
// everything, so nothing is read from the network or the file system.
func compileSchema(raw json.RawMessage) (*compiledSchema, error) {
	doc, err := decodeValue(raw)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	if m, ok := doc.(map[string]any); ok {
		if s, ok := m["$schema"]; ok {
			if s, _ := s.(string); strings.TrimSuffix(s, "#") != draft07 {
				return nil, fmt.Errorf("schema: $schema must be %s#", draft07)
			}
		}
	}
	var w schemaWalker
	doc, err = w.checkSchema(doc, "#", true)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	c := newCompiler()
	if err := c.AddResource(schemaURL, bytes.NewReader(b)); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return &compiledSchema{schema: s, patterns: strings.NewReplacer(w.patterns...)}, nil
}

// newCompiler returns a draft-07 compiler whose loader refuses every URL
// (jsonschema/v5 would otherwise read file:// URLs, and any scheme a
// program registers in jsonschema.Loaders) and whose "regex" format is
// ECMAScript's.
func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft7
	c.LoadURL = func(string) (io.ReadCloser, error) { return nil, errNoLoading }
	c.Formats["regex"] = isJSRegex
	return c
}

// isJSRegex is the "regex" format: an ECMAScript pattern with the u flag.
func isJSRegex(v any) bool {
	s, ok := v.(string)
	if !ok {
		return true
	}
	_, err := compileJSRegex(s, "u")
	return err == nil
}

// checkSchema walks a schema (a value in schema position) and returns it
// with its patterns translated.
func (w *schemaWalker) checkSchema(v any, at string, root bool) (any, error) {
	switch s := v.(type) {
	case bool:
		return s, nil
	case map[string]any:
		return w.checkSchemaObject(s, at, root)
	}
	return nil, fmt.Errorf("%s: a schema must be an object or a boolean, not %s", at, jsonType(v))
}

func (w *schemaWalker) checkSchemaObject(m map[string]any, at string, root bool) (any, error) {
	out := make(map[string]any, len(m))
	for _, k := range sortedKeys(m) {
		if !draft07Keywords[k] {
			return nil, fmt.Errorf("%s: unknown keyword %q (strict mode)", at, k)
		}
		out[k] = m[k]
	}
	if ref, ok := m["$ref"]; ok {
		r, isString := ref.(string)
		if !isString || !strings.HasPrefix(r, "#") {
			return nil, fmt.Errorf("%s: $ref %v: only references inside the schema (#...) are allowed", at, ref)
		}
		for _, k := range sortedKeys(m) {
			if !refSiblings[k] {
				return nil, fmt.Errorf("%s: keyword %q beside $ref (draft-07 ignores it, ajv does not)", at, k)
			}
		}
	}
	if _, ok := m["$schema"]; ok && !root {
		return nil, fmt.Errorf("%s: $schema is only allowed at the top", at)
	}
	if f, ok := m["format"]; ok {
		if f, _ := f.(string); !draft07Formats[f] {
			return nil, fmt.Errorf("%s: unknown format %q (strict mode)", at, m["format"])
		}
	}
	if _, hasIf := m["if"]; !hasIf {
		for _, k := range []string{"then", "else"} {
			if _, ok := m[k]; ok {
				return nil, fmt.Errorf("%s: %q without \"if\" is ignored (strict mode)", at, k)
			}
		}
	}
	if _, ok := m["additionalItems"]; ok {
		if _, isArray := m["items"].([]any); !isArray {
			return nil, fmt.Errorf("%s: \"additionalItems\" without an \"items\" array is ignored (strict mode)", at)
		}
	}
	if p, ok := m["pattern"].(string); ok {
		re, err := w.translate(p)
		if err != nil {
			return nil, fmt.Errorf("%s/pattern: %w", at, err)
		}
		out["pattern"] = re
	}
	for _, k := range sortedKeys(m) {
		if k == "pattern" {
			continue
		}
		var err error
		if out[k], err = w.checkSubschemas(k, m[k], at+"/"+k); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkSubschemas checks the subschemas held by keyword k; other keywords'
// values are returned unchanged (the meta-schema checks their shape).
func (w *schemaWalker) checkSubschemas(k string, v any, at string) (any, error) {
	switch k {
	case "additionalItems", "additionalProperties", "contains", "propertyNames",
		"if", "then", "else", "not":
		return w.checkSchema(v, at, false)
	case "items":
		if list, ok := v.([]any); ok {
			return w.checkSchemaList(list, at)
		}
		return w.checkSchema(v, at, false)
	case "allOf", "anyOf", "oneOf":
		if list, ok := v.([]any); ok {
			return w.checkSchemaList(list, at)
		}
	case "properties", "definitions":
		if m, ok := v.(map[string]any); ok {
			return w.checkSchemaMap(m, at, nil)
		}
	case "patternProperties":
		if m, ok := v.(map[string]any); ok {
			return w.checkSchemaMap(m, at, w.translate)
		}
	case "dependencies":
		if m, ok := v.(map[string]any); ok {
			out := make(map[string]any, len(m))
			for _, name := range sortedKeys(m) {
				if list, isArray := m[name].([]any); isArray {
					out[name] = list // property names; the meta-schema checks them
					continue
				}
				s, err := w.checkSchema(m[name], at+"/"+escapePointer(name), false)
				if err != nil {
					return nil, err
				}
				out[name] = s
			}
			return out, nil
		}
	}
	return v, nil
}

func (w *schemaWalker) checkSchemaList(list []any, at string) (any, error) {
	out := make([]any, len(list))
	for i, s := range list {
		var err error
		if out[i], err = w.checkSchema(s, fmt.Sprintf("%s/%d", at, i), false); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkSchemaMap checks a map of subschemas; rename, if given, translates
// each key (patternProperties' patterns).
func (w *schemaWalker) checkSchemaMap(m map[string]any, at string, rename func(string) (string, error)) (any, error) {
	out := make(map[string]any, len(m))
	for _, name := range sortedKeys(m) {
		s, err := w.checkSchema(m[name], at+"/"+escapePointer(name), false)
		if err != nil {
			return nil, err
		}
		key := name
		if rename != nil {
			if key, err = rename(name); err != nil {
				return nil, fmt.Errorf("%s/%s: %w", at, escapePointer(name), err)
			}
			if _, dup := out[key]; dup {
				return nil, fmt.Errorf("%s: two patterns mean the same regular expression", at)
			}
		}
		out[key] = s
	}
	return out, nil
}

// schemaWalker checks a schema and remembers how its patterns were
// translated, so that messages can quote them as written.
type schemaWalker struct {
	patterns []string // Go, JavaScript, Go, JavaScript, ...
}

// translate turns an ECMAScript pattern (u flag, as ajv compiles schema
// patterns) into the Go syntax v5 compiles.
func (w *schemaWalker) translate(js string) (string, error) {
	re, err := compileJSRegex(js, "u")
	if err != nil {
		return "", err
	}
	goSyntax := re.re.String()
	w.patterns = append(w.patterns, v5Quote(goSyntax), v5Quote(js))
	return goSyntax, nil
}

// v5Quote quotes a pattern as jsonschema/v5's messages do.
func v5Quote(s string) string {
	s = strconv.Quote(s)
	s = strings.ReplaceAll(s, `\"`, `"`)
	s = strings.ReplaceAll(s, `'`, `\'`)
	return "'" + s[1:len(s)-1] + "'"
}

// compiledSchema is a compiled schema and the replacer that turns the
// translated patterns in its messages back into the schema's own.
type compiledSchema struct {
	schema   *jsonschema.Schema
	patterns *strings.Replacer
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// validateSchema validates a decoded output against a compiled schema and
// turns a failure into details: "at /path: message" for each leaf error.
func validateSchema(s *compiledSchema, output any) (CheckResult, error) {
	err := s.schema.Validate(output)
	if err == nil {
		return passFail(true, ""), nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return CheckResult{}, fmt.Errorf("schema validation: %w", err)
	}
	var msgs []string
	var leaves func(e *jsonschema.ValidationError)
	leaves = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := e.InstanceLocation
			if loc == "" {
				loc = "/"
			}
			msgs = append(msgs, "at "+loc+": "+s.patterns.Replace(e.Message))
			return
		}
		for _, c := range e.Causes {
			leaves(c)
		}
	}
	leaves(ve)
	return passFail(false, strings.Join(msgs, "; ")), nil
}
