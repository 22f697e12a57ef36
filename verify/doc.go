// Package verify checks an agent's output against a contract's
// VerificationSpec (DelegateOS §6 and §10.3): the built-in check functions,
// the check registry, schema_match, deterministic_check, composite, and the
// v0.2 llm_judge and human_review methods.
//
// A Verifier takes a Spec (from ParseSpec, or built and then checked by
// Validate), the contract's Task and the output as JSON, and returns a
// CheckResult. Anything that keeps the result from being decided faithfully
// is an error wrapping one of the package's sentinels, never a pass: an
// invalid spec, an unknown check, bad params, a pattern or schema that Go
// cannot run with JavaScript's meaning, a score that is NaN, infinite or
// outside [0, 1], a missing judge or reviewer, a judge reply that is not
// exactly the JSON asked for.
//
// The specification leaves a number of things open. The decisions, and
// why:
//
// # Untrusted bytes
//
// The output is decoded once, as map[string]any, []any, string,
// json.Number, bool and nil; numbers keep every digit. It is refused if it
// is longer than MaxOutputLen, has invalid UTF-8 or an unpaired surrogate
// escape, a duplicate member name (two readers could see two different
// outputs), nesting deeper than 64, or a number longer than MaxNumberLen
// characters, with an exponent beyond ±MaxExponent, or outside the range
// of a double (JavaScript would read Infinity; the schema validator would
// build an enormous big.Rat). ParseSpec is as strict (strictjson: no
// unknown, duplicate or re-cased member) and bounds the tree (MaxSpecLen,
// MaxSpecDepth, MaxSpecNodes, MaxSteps). A member a method does not use
// (weights in all_pass, checkName in schema_match) is an error rather than
// silently ignored. Check params are decoded the same way by each built-in:
// an object, no unknown members, no member written as null.
//
// # regex_match
//
// The pattern is translated from ECMAScript syntax to Go's RE2 syntax by a
// parser that accepts only what it can translate with the same meaning:
// . becomes "anything but \n, \r, U+2028, U+2029", \s and \S JavaScript's
// whitespace set, [] and [^] match nothing and anything, every class member
// is written as \x{...} (so [[:alpha:]] keeps its JavaScript meaning), \uXXXX
// and \u{...} become code points, named groups become plain groups.
// Refused with an error: lookaround and backreferences (RE2 has neither),
// octal escapes, \c without a letter, identity escapes of letters (\a is
// "a" in JavaScript but BEL in Go; write the letter), lone surrogates,
// Unicode properties other than General_Category and Script values,
// repetition counts above 1000 (Go's limit), anything JavaScript itself
// rejects (nothing to repeat, unterminated groups, ranges out of order,
// and with the u flag lone braces and unknown escapes), patterns over
// MaxPatternLen.
//
// Flags: i, m, s map to Go's; u is Go's only mode (matching by code point);
// g and d do not change a single test() of a fresh RegExp (lastIndex is 0)
// and are accepted; y (sticky) anchors the match at the start of the input;
// v and unknown or repeated flags are errors. Where the engines cannot
// agree, the check is an error rather than a guess: without u, JavaScript
// matches UTF-16 code units, so an input (or a pattern) with a character
// outside the BMP is refused; without u, i folds case by toUpperCase, so
// the few hundred characters Go folds differently are refused in pattern
// and input; with m, JavaScript's ^ and $ also match at \r, U+2028 and
// U+2029, so such an input is refused. testdata/regex_vectors.json holds
// Node.js's answers for the translation to be tested against.
//
// A value that is not a string (or a field that is missing) fails.
//
// # json_schema and schema_match
//
// Draft-07 only ($schema, if present, must be draft-07's and only at the
// top). santhosh-tekuri/jsonschema/v5 validates; the compiler's loader
// refuses every URL, and every $ref must be a fragment ("#...") of the
// schema itself, so nothing is ever read from the network or the file
// system. Of ajv's strict mode, what ajv makes an error by default is
// reproduced: unknown keywords, unknown formats (and draft-07's
// idn-email and idn-hostname, which v5 would ignore), "then"/"else"
// without "if", "additionalItems" without an "items" array. Not reproduced:
// the checks ajv only logs by default (strictTypes, strictTuples,
// strictRequired). Also refused: a validation keyword beside $ref, which
// draft-07 (and v5) ignore but ajv applies. Patterns are ECMAScript with
// the u flag, as ajv compiles them, translated as above; the "regex" format
// accepts the patterns the translation accepts. Known differences that
// remain: v5 decides multipleOf exactly (ajv divides doubles, so
// 0.07 is not a multiple of 0.01 there), v5's format validators may differ
// from ajv-formats at the edges, and v5 asserts contentEncoding and
// contentMediaType where ajv treats them as annotations.
// testdata/schema_vectors.json holds ajv's answers.
//
// # The other built-ins
//
// string_length counts UTF-16 code units, as JavaScript's length does, so a
// contract gives the same answer in both implementations ("😀" is 2).
// string_length and array_length need min or max, integers in
// [0, 2^53−1], min ≤ max; a check with neither bound would check nothing.
// field_exists follows dot paths through objects and, by canonical decimal
// index, arrays; a member whose value is null exists (JavaScript's
// "!== undefined"); only members of the output count, not JavaScript's
// inherited names ("constructor") or an array's "length"; a member whose
// name contains "." cannot be named. exit_code needs an integer expected
// and an output object whose exitCode is a number of the same value (1.0
// equals 1, as in JavaScript). output_equals compares RFC 8785 canonical
// JSON and, because RFC 8785 writes numbers as doubles, also requires the
// numbers to be equal as exact decimals (9007199254740993 is not
// 9007199254740992).
//
// # deterministic_check and expectedResult
//
// §10.3 sets result.passed = deepEqual(result, expectedResult). The
// reference compares canonical JSON of the two, so a member absent on one
// side and present on the other differs. expectedResult must be an object
// with passed (required), score and details, and nothing else, none null
// (null would never equal an absent member). The step passes when passed,
// score and details all equal the check's, and its score is then 1.0, else
// 0.0: the check's own score described the check, not the comparison, and
// a weighted composite must not count a mismatch at, say, 1.0.
//
// # composite
//
// mode is required. all_pass stops at the first failed step (later steps
// do not run) and fails with "Step i failed: details". majority passes with
// more than half (a tie fails), score passCount/n. weighted needs one
// weight per step, each finite and ≥ 0 (a negative weight would let a
// failing step raise the score), summing to 1 ± 0.001; a step without a
// score counts 1.0 or 0.0; the threshold defaults to 0.7; the sum is taken
// in step order, as JavaScript's reduce does, so both implementations
// round alike; the reported score is capped at 1. Every check name in the
// tree is looked up, and the judge and reviewer the tree needs are checked,
// before any step runs, so an unknown name is an error even where all_pass
// would have stopped early. An error in any step is Verify's error.
//
// # llm_judge
//
// judgePrompt must contain {output} and {contract}. The §6.5 template
// already shows the contract and the output in their own sections, so the
// rubric's placeholders become references to them ("the Agent Output
// above", "the Contract above") rather than a second copy of the output:
// the output is the agent's, and copying it into the rubric would let it
// speak from the part of the prompt that carries the contract issuer's
// authority. The template is rendered exactly, in one pass (text in the
// task or the output is never read as a placeholder); the output is shown
// as compact JSON, so it stays on one line and cannot open a section of
// its own, and the output schema as compact JSON ({} when absent).
// passThreshold (0–1) is required; evaluations defaults to 3 and must be
// odd, 1–15; judgeModel defaults to claude-sonnet-4-20250514;
// judgeTemperature defaults to 0 and must be in [0, 2]. The evaluations run
// one after another; the median decides; when max − min > 0.3 (computed as
// JavaScript computes it) Verifier.Warn is told and the median is used.
// A Judge's score outside [0, 1] is an error. ParseJudgeReply is the
// strict reader of a model's reply: exactly one JSON object, score a
// number in [0, 1], reasoning a string, no other member; prose around it
// or a code fence is an error. CommandJudge runs a local command (argv, no
// shell) with the prompt on stdin, the model and temperature in its
// environment, a timeout, and at most MaxJudgeReplyLen bytes of stdout; a
// non-zero exit is an error.
//
// # human_review
//
// A human_review spec carries llm_judge's members (judgePrompt and
// passThreshold required) so that it can always escalate, plus timeoutMs.
// The timeout is the spec's timeoutMs, else Verifier.ReviewTimeout, else
// 24 h. The Reviewer's answer is the result; if it has not answered by the
// timeout (whether or not it honours its context, which is done at the
// deadline) the spec is judged as llm_judge and the details say so. A
// reviewer's error is Verify's error, not an escalation, and cancelling
// Verify's context ends the wait with the context's error. A Verifier
// without a Reviewer refuses human_review (ErrNoReviewer) instead of
// escalating at once: the contract asked for a human, and the specification
// lets a judge stand in only for a human who was asked and did not answer.
// One without a Judge refuses it too, since it could not escalate. A
// reviewer that ignores its context keeps running after Verify returns.
package verify
