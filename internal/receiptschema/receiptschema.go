// Package receiptschema validates receipts against the JSON Schemas that
// document their format (docs/schemas), for tests: what the proxy emits
// must be what the documentation says.
package receiptschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// Files maps each schema_version to its schema file under docs/schemas.
var Files = map[string]string{
	"decision_receipt/2":       "decision_receipt-2.json",
	"execution_receipt/2":      "execution_receipt-2.json",
	"human_approval_receipt/2": "human_approval_receipt-2.json",
	"audit_checkpoint/3":       "audit_checkpoint-3.json",
	"audit_checkpoint/2":       "audit_checkpoint-2.json",
	"audit_checkpoint/1":       "audit_checkpoint-1.json",
}

// Dir is the schemas' directory in the source tree.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "docs", "schemas")
}

var (
	once     sync.Once
	compiled map[string]*jsonschema.Schema
	loadErr  error
)

func load() {
	compiled = map[string]*jsonschema.Schema{}
	for kind, name := range Files {
		b, err := os.ReadFile(filepath.Join(Dir(), name))
		if err != nil {
			loadErr = err
			return
		}
		c := jsonschema.NewCompiler()
		c.Draft = jsonschema.Draft2020
		c.AssertFormat = true
		if err := c.AddResource("mem:///"+name, bytes.NewReader(b)); err != nil {
			loadErr = fmt.Errorf("%s: %w", name, err)
			return
		}
		s, err := c.Compile("mem:///" + name)
		if err != nil {
			loadErr = fmt.Errorf("%s: %w", name, err)
			return
		}
		compiled[kind] = s
	}
}

// Validate checks a receipt against the schema of its schema_version.
func Validate(receipt []byte) error {
	once.Do(load)
	if loadErr != nil {
		return loadErr
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(receipt))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	m, _ := v.(map[string]any)
	kind, _ := m["schema_version"].(string)
	s := compiled[kind]
	if s == nil {
		return fmt.Errorf("no schema for schema_version %q (have %s)", kind, strings.Join(kinds(), ", "))
	}
	return s.Validate(v)
}

func kinds() []string {
	var ks []string
	for k := range Files {
		ks = append(ks, k)
	}
	return ks
}
