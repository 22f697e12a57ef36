package mcpdef

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gowebpki/jcs"

	"github.com/delegateos/delegateos/internal/strictjson"
)

// Kind is what a definition defines.
type Kind int

// The kinds of definition.
const (
	Tool Kind = iota
	Prompt
	ResourceTemplate
	// NumKinds is the number of kinds.
	NumKinds
)

// Kinds are every kind, in the order lock files and diffs list them.
var Kinds = [NumKinds]Kind{Tool, Prompt, ResourceTemplate}

var kinds = [NumKinds]struct {
	name, plural, key, method, member, section string
	fields                                     []string
}{
	Tool: {"tool", "tools", "name", "tools/list", "tools", "tools",
		[]string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}},
	Prompt: {"prompt", "prompts", "name", "prompts/list", "prompts", "prompts",
		[]string{"name", "title", "description", "arguments"}},
	ResourceTemplate: {"resource template", "resource templates", "uriTemplate", "resources/templates/list", "resourceTemplates", "resource_templates",
		[]string{"uriTemplate", "name", "title", "description", "mimeType", "annotations"}},
}

// String names the kind for people: "tool", "prompt", "resource template".
func (k Kind) String() string { return kinds[k].name }

// Plural is String's plural.
func (k Kind) Plural() string { return kinds[k].plural }

// Key is the member that names an entry: "name", or a resource template's
// "uriTemplate".
func (k Kind) Key() string { return kinds[k].key }

// ListMethod is the request that lists the kind, e.g. "tools/list".
func (k Kind) ListMethod() string { return kinds[k].method }

// ResultMember is the member of a list result holding the entries, e.g.
// "resourceTemplates".
func (k Kind) ResultMember() string { return kinds[k].member }

// Section is the kind's section in a lock file, e.g. "resource_templates".
func (k Kind) Section() string { return kinds[k].section }

// Fields are the members a definition of the kind keeps, in the order
// diffs show them.
func (k Kind) Fields() []string { return kinds[k].fields }

// KindOfList is the kind a list method lists; false for another method.
func KindOfList(method string) (Kind, bool) {
	for _, k := range Kinds {
		if kinds[k].method == method {
			return k, true
		}
	}
	return 0, false
}

// Definition is one entry's definition in canonical form.
type Definition struct {
	Kind Kind
	// Name is the entry's key: a tool's or prompt's name, a template's
	// URI template.
	Name string
	// Canonical is the kept members as RFC 8785 JSON.
	Canonical []byte
}

// Digest is the SHA-256 of the canonical form, in lower-case hex.
func (d *Definition) Digest() string { return Digest(d.Canonical) }

// Digest is the SHA-256 of canonical, in lower-case hex.
func Digest(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// DigestLen is the length of a Digest.
const DigestLen = 2 * sha256.Size

// ErrNotDefinition is wrapped by every error Read returns.
var ErrNotDefinition = errors.New("not a definition")

// Read reads one listed entry of kind k.
func Read(k Kind, entry []byte) (*Definition, error) {
	if err := strictjson.Check(entry); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotDefinition, err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(entry, &members); err != nil || members == nil {
		return nil, fmt.Errorf("%w: a %s must be a JSON object", ErrNotDefinition, k)
	}
	fields := k.Fields()
	kept := make(map[string]json.RawMessage, len(fields))
	for name, v := range members {
		if slices.Contains(fields, name) {
			if !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
				kept[name] = v
			}
			continue
		}
		for _, f := range fields {
			if strings.EqualFold(name, f) {
				return nil, fmt.Errorf("%w: member %q differs from %q only in letter case", ErrNotDefinition, name, f)
			}
		}
	}
	var name string
	if err := json.Unmarshal(kept[k.Key()], &name); err != nil || name == "" {
		return nil, fmt.Errorf("%w: a %s's %s must be a non-empty string", ErrNotDefinition, k, k.Key())
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotDefinition, err)
	}
	c, err := jcs.Transform(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotDefinition, err)
	}
	return &Definition{Kind: k, Name: name, Canonical: c}, nil
}

// Change is one field of a definition that differs between two versions;
// a side is nil where the field is absent.
type Change struct {
	Field    string
	Old, New json.RawMessage
}

// Diff lists the fields whose values differ between two canonical
// definitions of kind k, in k's field order. A definition that cannot be
// read counts as having no fields.
func Diff(k Kind, old, new []byte) []Change {
	om, nm := fieldsOf(old), fieldsOf(new)
	var out []Change
	for _, f := range k.Fields() {
		o, n := om[f], nm[f]
		if !bytes.Equal(canonicalOrSelf(o), canonicalOrSelf(n)) {
			out = append(out, Change{Field: f, Old: o, New: n})
		}
	}
	return out
}

// ChangedFields names the fields Diff finds, joined by ", ".
func ChangedFields(k Kind, old, new []byte) string {
	var names []string
	for _, c := range Diff(k, old, new) {
		names = append(names, c.Field)
	}
	return strings.Join(names, ", ")
}

func fieldsOf(canonical []byte) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(canonical, &m) != nil {
		return nil
	}
	return m
}

func canonicalOrSelf(v json.RawMessage) []byte {
	if v == nil {
		return nil
	}
	if c, err := jcs.Transform(v); err == nil {
		return c
	}
	return v
}
