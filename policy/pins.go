package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/delegateos/delegateos/internal/mcpdef"
	"github.com/delegateos/delegateos/internal/strictjson"
)

// PinsVersion is the lock file format ParsePins reads and Marshal writes.
const PinsVersion = 1

// Limits of a lock file.
const (
	// MaxPinsFileSize bounds the lock file LoadPins reads.
	MaxPinsFileSize = 16 << 20
	// MaxPins bounds the entries of each section.
	MaxPins = 10000
)

// RepinFix is what every lock file problem tells the operator to do.
const RepinFix = "review with 'delegateos pin --diff --policy POLICY -- UPSTREAM...' and re-pin with 'delegateos pin --policy POLICY -- UPSTREAM...'"

// Pins is a lock file (the policy's tool_pins): the approved definition of
// every tool, prompt and resource template an upstream lists, each by the
// SHA-256 of its canonical form (see internal/mcpdef). With pins, the
// proxy hides and refuses whatever is not listed as approved.
type Pins struct {
	// Path is the file's path; "" when it was not read from a file.
	Path string
	// Entries are the pins of each kind, by name (a resource template's by
	// its URI template).
	Entries [mcpdef.NumKinds]map[string]*Pin
}

// Pin is one approved definition.
type Pin struct {
	Kind mcpdef.Kind
	Name string
	// SHA256 is the digest of the canonical definition, in lower-case hex.
	SHA256 string
	// Definition is the approved definition in canonical form, kept so
	// that a change can be shown field by field; nil when the lock holds
	// only the digest.
	Definition []byte
	// Line is where the entry starts in the lock file; 0 if it was not read.
	Line int
}

// Lookup returns the pin of the kind and name, or nil.
func (p *Pins) Lookup(k mcpdef.Kind, name string) *Pin { return p.Entries[k][name] }

// Count is the number of pins of kind k.
func (p *Pins) Count(k mcpdef.Kind) int { return len(p.Entries[k]) }

// NewPins pins the definitions given. A name listed twice with different
// definitions is an error: no pin can approve both.
func NewPins(defs []*mcpdef.Definition) (*Pins, error) {
	p := emptyPins()
	for _, d := range defs {
		if old := p.Entries[d.Kind][d.Name]; old != nil {
			if !bytes.Equal(old.Definition, d.Canonical) {
				return nil, fmt.Errorf("the upstream lists the %s %s twice, with different definitions; no pin can approve both", d.Kind, pinName(d.Name))
			}
			continue
		}
		p.Entries[d.Kind][d.Name] = &Pin{Kind: d.Kind, Name: d.Name, SHA256: d.Digest(), Definition: d.Canonical}
	}
	return p, nil
}

func emptyPins() *Pins {
	p := &Pins{}
	for _, k := range mcpdef.Kinds {
		p.Entries[k] = map[string]*Pin{}
	}
	return p
}

// pinJSON is an entry as a lock file writes it.
type pinJSON struct {
	Name       string          `json:"name"`
	SHA256     string          `json:"sha256"`
	Definition json.RawMessage `json:"definition,omitempty"`
}

// Marshal writes the lock file: its version and, in each kind's section,
// the entries sorted by name, indented so that a change to one field is
// one changed line under version control.
func (p *Pins) Marshal() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\n  \"version\": %d", PinsVersion)
	for _, k := range mcpdef.Kinds {
		fmt.Fprintf(&b, ",\n  %q: [", k.Section())
		names := make([]string, 0, len(p.Entries[k]))
		for n := range p.Entries[k] {
			names = append(names, n)
		}
		slices.Sort(names)
		for i, n := range names {
			pin := p.Entries[k][n]
			var e bytes.Buffer
			enc := json.NewEncoder(&e)
			enc.SetEscapeHTML(false)
			enc.SetIndent("    ", "  ")
			if err := enc.Encode(pinJSON{Name: pin.Name, SHA256: pin.SHA256, Definition: pin.Definition}); err != nil {
				return nil, err
			}
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("\n    ")
			b.Write(bytes.TrimRight(e.Bytes(), "\n"))
		}
		if len(names) > 0 {
			b.WriteString("\n  ")
		}
		b.WriteByte(']')
	}
	b.WriteString("\n}\n")
	return b.Bytes(), nil
}

// LoadPins reads and parses the lock file at path. A file that cannot be
// read is an error from the os package (fs.ErrNotExist when it is
// missing); one that is not a valid lock file is Errors, each naming the
// file, the line and the entry.
func LoadPins(path string) (*Pins, error) {
	f, err := openFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxPinsFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	p, err := ParsePins(data)
	if errs, ok := err.(Errors); ok {
		for _, e := range errs {
			e.File = path
		}
	}
	if err != nil {
		return nil, err
	}
	p.Path = path
	return p, nil
}

// ParsePins parses a lock file's contents strictly: unknown or repeated
// members, a missing section, a name pinned twice, a digest that is not 64
// lower-case hex digits, or a definition that does not hash to its digest
// is an error naming the entry and saying what to do.
func ParsePins(data []byte) (*Pins, error) {
	pp := &pinsParser{data: data}
	p := pp.parse()
	if len(pp.errs) > 0 {
		return nil, pp.errs
	}
	return p, nil
}

type pinsParser struct {
	data []byte
	errs Errors
}

func (pp *pinsParser) errorf(at int, key, format string, args ...any) {
	if len(pp.errs) < maxProblems {
		pp.errs = append(pp.errs, &Error{Line: pp.line(at), Key: key, Msg: fmt.Sprintf(format, args...)})
	}
}

// line is the line of the first byte of a value at or after offset at
// (past white space and separators).
func (pp *pinsParser) line(at int) int {
	at = min(max(at, 0), len(pp.data))
	for at < len(pp.data) && strings.IndexByte(" \t\r\n,:", pp.data[at]) >= 0 {
		at++
	}
	return bytes.Count(pp.data[:at], []byte("\n")) + 1
}

// syntax reports a decoding error at offset at.
func (pp *pinsParser) syntax(at int, err error) {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		pp.errorf(int(se.Offset)-1, "", "not valid JSON: %v; %s", se, RepinFix)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		pp.errorf(len(pp.data), "", "the file ends in the middle of its JSON (truncated?); %s", RepinFix)
	default:
		pp.errorf(at, "", "not valid JSON: %v; %s", err, RepinFix)
	}
}

func (pp *pinsParser) parse() *Pins {
	if len(pp.data) > MaxPinsFileSize {
		pp.errorf(0, "", "larger than %d bytes", MaxPinsFileSize)
		return nil
	}
	if !utf8.Valid(pp.data) {
		pp.errorf(0, "", "not valid UTF-8; %s", RepinFix)
		return nil
	}
	if len(bytes.TrimSpace(pp.data)) == 0 {
		pp.errorf(0, "", "the file is empty; %s", RepinFix)
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(pp.data))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil {
		pp.syntax(0, err)
		return nil
	} else if tok != json.Delim('{') {
		pp.errorf(0, "", "a lock file is a JSON object {\"version\": %d, \"tools\": [...], \"prompts\": [...], \"resource_templates\": [...]}; %s", PinsVersion, RepinFix)
		return nil
	}
	p := emptyPins()
	seen := map[string]int{}
	for dec.More() {
		at := int(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			pp.syntax(at, err)
			return nil
		}
		key, _ := tok.(string)
		if first, dup := seen[key]; dup {
			pp.errorf(at, key, "given twice (first on line %d); %s", first, RepinFix)
			return nil
		}
		seen[key] = pp.line(at)
		if key == "version" {
			var v json.Number
			if err := dec.Decode(&v); err != nil {
				pp.errorf(at, key, "must be %d", PinsVersion)
				return nil
			}
			if v.String() != fmt.Sprint(PinsVersion) {
				pp.errorf(at, key, "is %s, but this delegateos reads version %d lock files; %s", v, PinsVersion, RepinFix)
			}
			continue
		}
		k, ok := sectionKind(key)
		if !ok {
			pp.errorf(at, key, "unknown key; a lock file holds version, tools, prompts and resource_templates")
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				pp.syntax(at, err)
				return nil
			}
			continue
		}
		if !pp.section(dec, k, p) {
			return nil
		}
	}
	if _, err := dec.Token(); err != nil {
		pp.syntax(int(dec.InputOffset()), err)
		return nil
	}
	if _, err := dec.Token(); err != io.EOF {
		pp.errorf(int(dec.InputOffset()), "", "more follows the lock file's JSON object; %s", RepinFix)
		return nil
	}
	if _, ok := seen["version"]; !ok {
		pp.errorf(0, "version", "missing: a lock file starts {\"version\": %d, ...}; %s", PinsVersion, RepinFix)
	}
	for _, k := range mcpdef.Kinds {
		if _, ok := seen[k.Section()]; !ok {
			pp.errorf(0, k.Section(), "missing: a lock file lists every kind, [] when the server offers none; %s", RepinFix)
		}
	}
	return p
}

func sectionKind(key string) (mcpdef.Kind, bool) {
	for _, k := range mcpdef.Kinds {
		if k.Section() == key {
			return k, true
		}
	}
	return 0, false
}

// section reads one kind's entries into p; false when reading must stop.
func (pp *pinsParser) section(dec *json.Decoder, k mcpdef.Kind, p *Pins) bool {
	at := int(dec.InputOffset())
	tok, err := dec.Token()
	if err != nil {
		pp.syntax(at, err)
		return false
	}
	if tok != json.Delim('[') {
		pp.errorf(at, k.Section(), "must be a list of {\"name\", \"sha256\", \"definition\"} entries; %s", RepinFix)
		return false
	}
	first := map[string]int{}
	for i := 0; dec.More(); i++ {
		at := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			pp.syntax(at, err)
			return false
		}
		if i == MaxPins {
			pp.errorf(at, k.Section(), "more than %d entries", MaxPins)
			return false
		}
		key := fmt.Sprintf("%s[%d]", k.Section(), i)
		pin := pp.entry(k, raw, at, key)
		if pin == nil {
			continue
		}
		if j, dup := first[pin.Name]; dup {
			pp.errorf(at, key, "the %s %s is pinned twice (first as %s[%d]); a server lists each name once, so keep one entry: %s", k, pinName(pin.Name), k.Section(), j, RepinFix)
			continue
		}
		first[pin.Name] = i
		p.Entries[k][pin.Name] = pin
	}
	if _, err := dec.Token(); err != nil {
		pp.syntax(int(dec.InputOffset()), err)
		return false
	}
	return true
}

// entry checks one entry; nil if it is not valid.
func (pp *pinsParser) entry(k mcpdef.Kind, raw []byte, at int, key string) *Pin {
	var e pinJSON
	if err := strictjson.Unmarshal(raw, &e); err != nil {
		pp.errorf(at, key, "must be {\"name\": ..., \"sha256\": ..., \"definition\": {...}}: %v; %s", err, RepinFix)
		return nil
	}
	if e.Name == "" {
		pp.errorf(at, key+".name", "must be the %s's non-empty %s; %s", k, k.Key(), RepinFix)
		return nil
	}
	if !isDigest(e.SHA256) {
		pp.errorf(at, key+".sha256", "the %s %s's digest must be %d lower-case hex digits (a SHA-256), not %q (%d characters); %s",
			k, pinName(e.Name), mcpdef.DigestLen, clip(e.SHA256, 80), len(e.SHA256), RepinFix)
		return nil
	}
	pin := &Pin{Kind: k, Name: e.Name, SHA256: e.SHA256, Line: pp.line(at)}
	if e.Definition == nil {
		return pin
	}
	d, err := mcpdef.Read(k, e.Definition)
	switch {
	case err != nil:
		pp.errorf(at, key+".definition", "%v; %s", err, RepinFix)
		return nil
	case d.Name != e.Name:
		pp.errorf(at, key+".definition", "defines the %s %s, but the entry is named %s; %s", k, pinName(d.Name), pinName(e.Name), RepinFix)
		return nil
	case d.Digest() != e.SHA256:
		pp.errorf(at, key+".sha256", "is not the digest of the entry's definition (%s): the lock was changed by hand; %s", d.Digest(), RepinFix)
		return nil
	}
	pin.Definition = d.Canonical
	return pin
}

func isDigest(s string) bool {
	if len(s) != mcpdef.DigestLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// pinName writes a name for a message: Go-quoted, so that no name can pass
// for part of it.
func pinName(s string) string { return fmt.Sprintf("%q", clip(s, 200)) }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
