package reputation

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/delegateos/delegateos/internal/timestamp"
)

// decoder reads typed values out of YAML nodes, collecting problems with
// the file's name and line instead of stopping at the first.
type decoder struct {
	file     string
	problems []Problem
}

func (d *decoder) add(sev Severity, n *yaml.Node, field, format string, args ...any) {
	p := Problem{File: d.file, Field: field, Message: fmt.Sprintf(format, args...), Severity: sev}
	if n != nil {
		p.Line = n.Line + fmLineOffset
	}
	d.problems = append(d.problems, p)
}

func (d *decoder) errorf(n *yaml.Node, field, format string, args ...any) {
	d.add(SeverityError, n, field, format, args...)
}

func (d *decoder) warnf(n *yaml.Node, field, format string, args ...any) {
	d.add(SeverityWarning, n, field, format, args...)
}

// err returns the collected errors as a *ValidationError, or nil.
func (d *decoder) err() error {
	if errs := errorsOnly(d.problems); len(errs) > 0 {
		return &ValidationError{Problems: errs}
	}
	return nil
}

// kind names what a node holds, for messages.
func kind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!str":
		return "a string"
	case "!!int", "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case "!!null":
		return "null"
	case "!!timestamp":
		return "a timestamp"
	}
	return "a value"
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// textKind says which characters a string may hold.
type textKind int

const (
	textLine  textKind = iota // one line: no control characters at all
	textBlock                 // free text: tabs and line breaks allowed
)

// str reads a string of at most max bytes. Control characters (other than
// tabs and line breaks in free text), Unicode bidirectional controls and
// invalid UTF-8 are refused: these strings end up on terminals.
func (d *decoder) str(n *yaml.Node, field string, max int, tk textKind) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		d.errorf(n, field, "must be a string, not %s", kind(n))
		return "", false
	}
	if err := checkText(n.Value, max, tk); err != nil {
		d.errorf(n, field, "%v", err)
		return "", false
	}
	return n.Value, true
}

// checkText applies the rules of decoder.str.
func checkText(s string, max int, tk textKind) error {
	if len(s) > max {
		return fmt.Errorf("longer than %d bytes", max)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("not valid UTF-8")
	}
	for _, r := range s {
		if tk == textBlock && (r == '\t' || r == '\n' || r == '\r') {
			continue
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return fmt.Errorf("holds the control character %U", r)
		}
	}
	return nil
}

// num reads a finite number.
func (d *decoder) num(n *yaml.Node, field string) (float64, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!float" && n.Tag != "!!int" {
		d.errorf(n, field, "must be a number, not %s", kind(n))
		return 0, false
	}
	f, err := strconv.ParseFloat(n.Value, 64)
	if err != nil {
		if err := n.Decode(&f); err != nil {
			d.errorf(n, field, "%q is not a number", clip(n.Value))
			return 0, false
		}
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		d.errorf(n, field, "must be a finite number")
		return 0, false
	}
	return f, true
}

// score reads a number in [0, 1].
func (d *decoder) score(n *yaml.Node, field string) (float64, bool) {
	f, ok := d.num(n, field)
	if ok && !validScore(f) {
		d.errorf(n, field, "%v is outside [0, 1]", f)
		return 0, false
	}
	return f, ok
}

// maxCount bounds integers (sample sizes) to what every JSON reader holds
// exactly.
const maxCount = 1<<53 - 1

// count reads a non-negative integer.
func (d *decoder) count(n *yaml.Node, field string) (int, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		d.errorf(n, field, "must be a non-negative integer, not %s", kind(n))
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil || v < 0 || v > maxCount {
		d.errorf(n, field, "%q is not a non-negative integer", clip(n.Value))
		return 0, false
	}
	return int(v), true
}

func (d *decoder) boolean(n *yaml.Node, field string) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		d.errorf(n, field, "must be true or false, not %s", kind(n))
		return false, false
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		d.errorf(n, field, "%q is not a boolean", clip(n.Value))
		return false, false
	}
	return b, true
}

// time reads an RFC 3339 timestamp, quoted or not.
func (d *decoder) time(n *yaml.Node, field string) (time.Time, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" && n.Tag != "!!timestamp" {
		d.errorf(n, field, "must be an ISO 8601 timestamp, not %s", kind(n))
		return time.Time{}, false
	}
	if len(n.Value) > 64 {
		d.errorf(n, field, "is not an RFC 3339 timestamp")
		return time.Time{}, false
	}
	t, err := timestamp.Parse(n.Value)
	if err != nil {
		d.errorf(n, field, "%q is not an RFC 3339 timestamp such as 2026-02-15T10:30:00Z", clip(n.Value))
		return time.Time{}, false
	}
	return truncate(t), true
}

// mapping checks that n is a mapping.
func (d *decoder) mapping(n *yaml.Node, field string) bool {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, field, "must be a mapping, not %s", kind(n))
		return false
	}
	return true
}

// did reads a DID.
func (d *decoder) did(n *yaml.Node, field string) (string, bool) {
	s, ok := d.str(n, field, MaxIDLen, textLine)
	if ok && !ValidDID(s) {
		d.errorf(n, field, "%q is not a valid DID (did:<method>:<id>)", clip(s))
		return "", false
	}
	return s, ok
}

// fields maps a mapping's keys to their values (the keys are unique:
// checkNode refused duplicates) and records each key node.
func fields(m *yaml.Node) map[string]*yaml.Node {
	f := make(map[string]*yaml.Node, len(m.Content)/2)
	for i := 0; i+1 < len(m.Content); i += 2 {
		f[m.Content[i].Value] = m.Content[i+1]
	}
	return f
}

// required reads the named field of m, reporting it missing.
func (d *decoder) required(f map[string]*yaml.Node, m *yaml.Node, prefix, name string) *yaml.Node {
	n := f[name]
	if n == nil {
		d.errorf(m, prefix+name, "is required")
	}
	return n
}

// --- building nodes ---

func strNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.DoubleQuotedStyle}
}

func floatNode(x float64) *yaml.Node {
	s := strconv.FormatFloat(x, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: s}
}

func intNode(n int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(n)}
}

func boolNode(b bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(b)}
}

func nullNode() *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"} }

func timeNode(t time.Time) *yaml.Node { return strNode(timestamp.Format(t)) }

// keyNode is a mapping key: plain style, as people write them.
func keyNode(k string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}
}

func mapNode(kv ...any) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Content = append(m.Content, keyNode(kv[i].(string)), kv[i+1].(*yaml.Node))
	}
	return m
}

func emptyMapNode() *yaml.Node {
	return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle}
}

func strSeqNode(items []string) *yaml.Node {
	s := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, it := range items {
		s.Content = append(s.Content, strNode(it))
	}
	return s
}

// lookup returns the value of key in mapping m, or nil.
func lookup(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// setKey sets key in mapping m to v, in place if the key exists (keeping
// its position and comments), else at the end.
func setKey(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			old := m.Content[i+1]
			v.LineComment = old.LineComment
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, keyNode(key), v)
}

// childMap returns the mapping under key in m, creating it (or replacing a
// null) when missing.
func childMap(m *yaml.Node, key string) *yaml.Node {
	c := lookup(m, key)
	if c == nil || c.Kind != yaml.MappingNode {
		c = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		setKey(m, key, c)
	}
	if c.Style == yaml.FlowStyle && len(c.Content) == 0 {
		c.Style = 0 // an empty "{}" grows into block style
	}
	return c
}

// yamlNode abbreviates yaml.Node in signatures.
type yamlNode = yaml.Node
