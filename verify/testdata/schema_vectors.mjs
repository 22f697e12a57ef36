// Regenerates schema_vectors.json: what ajv 8 in strict mode (draft-07,
// with ajv-formats) says for each (schema, instance): "compile_error", or
// whether the instance is valid. AJV_MODULES names a node_modules holding
// ajv and ajv-formats (the conformance suite's has them):
//   AJV_MODULES=../../conformance/node_modules node schema_vectors.mjs > schema_vectors.json
// TestSchemaVectors holds compileSchema and validateSchema to the answers.
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.resolve(process.env.AJV_MODULES ?? "node_modules", "..", "x.js"));
const Ajv = require("ajv").default;
const addFormats = require("ajv-formats").default;

const cases = [
  [{ type: "object", required: ["a"], properties: { a: { type: "string" } } }, [{ a: "x" }, { a: 1 }, {}, [], "s"]],
  [{ type: "integer" }, [1, 1.0, 1.5, "1", 1e3, -0]],
  [{ type: "number", minimum: 0, exclusiveMaximum: 10 }, [0, 10, 9.999, -1]],
  [{ type: "number", multipleOf: 0.01 }, [0.07, 1.005]],
  [{ type: "string", pattern: "^\\d{3}$" }, ["123", "12", "1234", "١٢٣"]],
  [{ type: "string", pattern: "^\\s*$" }, ["\u00a0", " x"]],
  [{ type: "string", pattern: "^.$" }, ["😀", "\n"]],
  [{ type: "string", pattern: "(?=a)" }, ["a"]],
  [{ type: "string", minLength: 2, maxLength: 3 }, ["a", "ab", "abcd", "😀", "😀😀"]],
  [{ type: "array", items: { type: "number" }, minItems: 1, uniqueItems: true }, [[1, 2], [1, 1], [], [1, "a"]]],
  [{ type: "array", items: [{ type: "string" }], additionalItems: false }, [["a"], ["a", "b"]]],
  [{ type: "array", items: { type: "string" }, additionalItems: false }, [["a"]]],
  [{ type: "array", contains: { const: 3 } }, [[1, 3], [1]]],
  [{ type: "object", additionalProperties: false, properties: { a: {} } }, [{ a: 1 }, { a: 1, b: 2 }]],
  [{ type: "object", patternProperties: { "^x-": { type: "string" } }, additionalProperties: false }, [{ "x-a": "s" }, { "x-a": 1 }, { y: 1 }]],
  [{ type: "object", propertyNames: { maxLength: 3 } }, [{ abc: 1 }, { abcd: 1 }]],
  [{ type: "object", dependencies: { a: ["b"], c: { required: ["d"] } } }, [{ a: 1, b: 1 }, { a: 1 }, { c: 1 }, { c: 1, d: 1 }]],
  [{ enum: [1, "a", null, { x: [1] }] }, [1, 1.0, "a", null, { x: [1] }, { x: [2] }, 2]],
  [{ const: { a: [1, 2] } }, [{ a: [1, 2] }, { a: [2, 1] }]],
  [{ if: { type: "string" }, then: { minLength: 2 }, else: { type: "number" } }, ["ab", "a", 1, null]],
  [{ then: { minLength: 2 } }, ["a"]],
  [{ allOf: [{ type: "number" }, { minimum: 2 }] }, [3, 1]],
  [{ anyOf: [{ type: "string" }, { type: "number" }] }, ["a", 1, null]],
  [{ oneOf: [{ type: "number" }, { type: "integer" }] }, [1.5, 1]],
  [{ not: { type: "null" } }, [null, 0]],
  [{ definitions: { pos: { type: "number", minimum: 0 } }, type: "array", items: { $ref: "#/definitions/pos" } }, [[1, 2], [1, -2]]],
  [{ $ref: "#/definitions/missing" }, [1]],
  [{ $ref: "http://example.com/schema.json" }, [1]],
  [{ $ref: "file:///etc/passwd" }, [1]],
  [{ $ref: "#/definitions/a", definitions: { a: { type: "string" } } }, ["s"]],
  [{ $schema: "http://json-schema.org/draft-07/schema#", type: "string" }, ["s", 1]],
  [{ $schema: "https://json-schema.org/draft/2020-12/schema", type: "string" }, ["s"]],
  [{ type: "string", format: "email" }, ["a@b.co", "not an email"]],
  [{ type: "string", format: "date-time" }, ["2026-01-01T00:00:00Z", "2026-01-01"]],
  [{ type: "string", format: "date" }, ["2026-01-01", "2026-13-01"]],
  [{ type: "string", format: "ipv4" }, ["1.2.3.4", "1.2.3"]],
  [{ type: "string", format: "uri" }, ["https://example.com/x", "not a uri"]],
  [{ type: "string", format: "regex" }, ["^a+$", "(?=a)", "("]],
  [{ type: "string", format: "bogus" }, ["a"]],
  [{ type: "string", unknownKeyword: true }, ["a"]],
  [{ type: "object", properties: { a: { type: "string", nope: 1 } } }, [{ a: "x" }]],
  [{ type: "strin" }, ["a"]],
  [{ minimum: "1" }, [1]],
  [true, [1, null]],
  [false, [1]],
  [{ type: ["string", "null"] }, ["a", null, 1]],
  [{ maxProperties: 1, minProperties: 1 }, [{ a: 1 }, {}, { a: 1, b: 2 }]],
  [{ title: "t", description: "d", $comment: "c", examples: [1], default: 1, readOnly: true, type: "number" }, [1]],
];
const ajv = new Ajv({ strict: true, strictTypes: false, strictTuples: false, strictRequired: false, allowUnionTypes: true });
addFormats(ajv);
const out = [];
for (const [schema, instances] of cases) {
  let validate;
  try {
    validate = ajv.compile(schema);
  } catch (e) {
    out.push({ schema, instance: instances[0], result: "compile_error" });
    continue;
  }
  for (const instance of instances) out.push({ schema, instance, result: validate(instance) });
}
process.stdout.write(JSON.stringify(out, null, 1) + "\n");
