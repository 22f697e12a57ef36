package contract

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/delegateos/delegateos/identity"
)

// Fixed keys and times make every test contract deterministic.
var (
	rootKey  = testKey(1, "root")
	aliceKey = testKey(2, "alice")
	bobKey   = testKey(3, "bob")
	evilKey  = testKey(6, "evil")

	t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func testKey(b byte, name string) *identity.Keypair {
	k, err := identity.FromSeed(bytes.Repeat([]byte{b}, 32), name)
	if err != nil {
		panic(err)
	}
	return k
}

const (
	testSchema = `{"type":"object","required":["summary"],"properties":{"summary":{"type":"string","maxLength":2000},"score":{"type":"number","minimum":0.5}}}`
	// testVerification is a composite of two built-in checks.
	testVerification = `{"method":"composite","mode":"all_pass","steps":[` +
		`{"method":"deterministic_check","checkName":"string_length","checkParams":{"field":"summary","min":10,"max":2000}},` +
		`{"method":"deterministic_check","checkName":"field_exists","checkParams":{"fields":["summary"]}}]}`
	testInputs = `{"query":"quantum computing","limits":{"n":10,"ratio":0.1,"tags":["a","b"]},"flag":true,"none":null}`
)

// testParams are the parameters of the standard contract: root asks for a
// summary within 5000 microcents and a day.
func testParams() CreateParams {
	return CreateParams{
		ID:                   "ct_a1b2c3d4e5f6",
		Title:                "Summarize the literature",
		Description:          "Read the papers in /project/papers and summarize them.",
		Inputs:               json.RawMessage(testInputs),
		OutputSchema:         json.RawMessage(testSchema),
		Verification:         json.RawMessage(testVerification),
		MaxBudgetMicrocents:  5000,
		Deadline:             t0.Add(24 * time.Hour),
		MaxChainDepth:        2,
		RequiredCapabilities: []string{"docs:read", "web:search"},
	}
}

func testContract(t testing.TB) *TaskContract {
	t.Helper()
	c, err := Create(rootKey, testParams(), t0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustMarshal(t testing.TB, c *TaskContract) []byte {
	t.Helper()
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// indent pretty-prints JSON the way people edit contract files.
func indent(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "    "); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// editJSON decodes a JSON value (numbers kept as written), lets f change
// it and encodes it again.
func editJSON(t testing.TB, raw []byte, f func(v map[string]any)) json.RawMessage {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	f(v)
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
