package verify

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// benchOutput is an array of n small objects.
func benchOutput(n int) json.RawMessage {
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"id":12345,"name":"item name here","tags":["a","b"],"score":0.75}`)
	}
	b.WriteString("]")
	return json.RawMessage(b.String())
}

func benchVerify(b *testing.B, spec string, output json.RawMessage) {
	s := mustSpec(b, spec)
	v := &Verifier{}
	b.SetBytes(int64(len(output)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := v.Verify(context.Background(), s, Task{}, output); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifySchema: schema_match over ~1 MiB of output.
func BenchmarkVerifySchema(b *testing.B) {
	benchVerify(b, `{"method":"schema_match","schema":{"type":"array","items":{"type":"object","required":["id","name"],
		"properties":{"id":{"type":"integer","minimum":0},"name":{"type":"string","pattern":"^\\w[\\w ]*$"},"tags":{"type":"array","uniqueItems":true},"score":{"maximum":1}}}}}`,
		benchOutput(16000))
}

// BenchmarkVerifyComposite: several built-ins over ~1 MiB of output.
func BenchmarkVerifyComposite(b *testing.B) {
	benchVerify(b, `{"method":"composite","mode":"majority","steps":[
		{"method":"deterministic_check","checkName":"array_length","checkParams":{"min":1}},
		{"method":"deterministic_check","checkName":"field_exists","checkParams":{"fields":["0.id","100.tags.1"]}},
		{"method":"deterministic_check","checkName":"regex_match","checkParams":{"pattern":"^item","field":"5.name"}}]}`,
		benchOutput(16000))
}

// BenchmarkVerifyWorstNumbers: MaxOutputLen of numbers at the exponent
// bound, each compared by the schema validator (big.Rat).
func BenchmarkVerifyWorstNumbers(b *testing.B) {
	n := MaxOutputLen/8 - 1
	out := "[" + strings.Repeat("-1e-400,", n-1) + "-1e-400]"
	benchVerify(b, `{"method":"schema_match","schema":{"items":{"type":"integer","multipleOf":3,"maximum":5}}}`, json.RawMessage(out))
}

// BenchmarkRegexLongInput: a JavaScript pattern over a 1 MiB string.
func BenchmarkRegexLongInput(b *testing.B) {
	out, _ := json.Marshal(strings.Repeat("lorem ipsum dolor ", 1<<16))
	benchVerify(b, `{"method":"deterministic_check","checkName":"regex_match","checkParams":{"pattern":"\\s(sit|amet)\\s","flags":"i"}}`, out)
}
