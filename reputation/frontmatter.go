package reputation

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"
)

// A workspace file is YAML front matter between two lines of "---",
// followed by a Markdown body (AWP's dual format).
var delimiter = []byte("---")

// document is a parsed workspace file. The YAML is kept as nodes so that a
// rewrite changes only the fields this package sets: unknown fields, their
// order, comments and the body survive.
type document struct {
	node *yaml.Node // the DocumentNode
	root *yaml.Node // its top-level mapping
	fm   []byte     // the front matter as read, for splicing (nil for a new file)
	body []byte     // everything after the closing delimiter line, verbatim

	// block and signals are set when a profile was read by
	// parseProfileFast: block is the signals list's text as read, signals
	// its decoded items, and the signals field of root holds
	// signalsPlaceholder instead of the list.
	block   []byte
	signals []Signal
}

// lineError is a problem at a line of the file (0: not known).
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string { return e.msg }

// splitFrontMatter separates the front matter from the body. The file must
// start with a "---" line; the front matter ends at the next "---" line.
func splitFrontMatter(data []byte) (fm, body []byte, err error) {
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return nil, nil, &lineError{1, "the file starts with a byte order mark; save it as UTF-8 without one"}
	}
	first, rest, ok := cutLine(data)
	if !ok || !bytes.Equal(first, delimiter) {
		return nil, nil, &lineError{1, `the file does not start with a "---" line opening its YAML front matter`}
	}
	start := len(data) - len(rest)
	if i := closingLine(data[start:]); i >= 0 {
		_, next, _ := cutLine(data[start+i:])
		return data[start : start+i], next, nil
	}
	return nil, nil, &lineError{0, `the YAML front matter has no closing "---" line`}
}

// closingLine returns the offset in b of its first line that is "---"
// (with or without a CR before its newline, or at the end), or -1.
func closingLine(b []byte) int {
	for off := 0; off < len(b); {
		// Only a line starting with "---" can close: skip to the next.
		if !bytes.HasPrefix(b[off:], delimiter) {
			i := bytes.Index(b[off:], []byte("\n---"))
			if i < 0 {
				return -1
			}
			off += i + 1
		}
		line, next, _ := cutLine(b[off:])
		if bytes.Equal(line, delimiter) {
			return off
		}
		off = len(b) - len(next)
	}
	return -1
}

// cutLine returns the first line of b without its line ending ("\n" or
// "\r\n"), the rest after it, and whether a line ending was found.
func cutLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, nil, false
	}
	line = b[:i]
	line = bytes.TrimSuffix(line, []byte("\r"))
	return line, b[i+1:], true
}

// fmLineOffset turns a front-matter line into a file line: the opening
// delimiter is line 1.
const fmLineOffset = 1

// parseDocument parses a workspace file strictly: one YAML document whose
// top level is a mapping, no anchors, aliases, merge keys or custom tags,
// no duplicate keys, nesting at most MaxDepth.
func parseDocument(data []byte) (*document, error) {
	if len(data) > MaxFileSize {
		return nil, &lineError{0, fmt.Sprintf("the file is larger than %d bytes", MaxFileSize)}
	}
	fm, body, err := splitFrontMatter(data)
	if err != nil {
		return nil, err
	}
	return parseFrontMatter(fm, body)
}

// parseFrontMatter parses the front matter of a file split by
// splitFrontMatter, with the rules of parseDocument.
func parseFrontMatter(fm, body []byte) (*document, error) {
	dec := yaml.NewDecoder(bytes.NewReader(fm))
	var node yaml.Node
	if err := dec.Decode(&node); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &lineError{0, "the YAML front matter is empty"}
		}
		return nil, &lineError{0, "YAML front matter: " + yamlMessage(err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &lineError{0, "the YAML front matter holds more than one document"}
	}
	if node.Kind != yaml.DocumentNode || len(node.Content) != 1 || node.Content[0].Kind != yaml.MappingNode {
		return nil, &lineError{node.Line + fmLineOffset, "the YAML front matter is not a mapping of field names to values"}
	}
	if err := checkNode(node.Content[0], 1); err != nil {
		return nil, err
	}
	return &document{node: &node, root: node.Content[0], fm: fm, body: body}, nil
}

// yamlMessage rewrites yaml.v3's "yaml: line N: ..." to file lines.
func yamlMessage(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var n int
	if _, scanErr := fmt.Sscanf(msg, "line %d:", &n); scanErr == nil {
		_, after, _ := strings.Cut(msg, ":")
		return fmt.Sprintf("line %d:%s", n+fmLineOffset, after)
	}
	return msg
}

// allowedTags are the tags of YAML's core schema (and timestamps, which
// YAML 1.1 readers produce for unquoted dates). Anything else, explicit
// custom tags and !!merge included, is refused.
var allowedTags = map[string]bool{
	"!!str": true, "!!int": true, "!!float": true, "!!bool": true, "!!null": true,
	"!!timestamp": true, "!!map": true, "!!seq": true,
}

// checkNode enforces the structural rules of parseDocument below n.
func checkNode(n *yaml.Node, depth int) error {
	line := n.Line + fmLineOffset
	switch {
	case depth > MaxDepth:
		return &lineError{line, fmt.Sprintf("YAML nested deeper than %d levels", MaxDepth)}
	case n.Kind == yaml.AliasNode:
		return &lineError{line, "YAML aliases are not accepted in workspace files"}
	case n.Anchor != "":
		return &lineError{line, "YAML anchors are not accepted in workspace files"}
	case !allowedTags[n.Tag]:
		return &lineError{line, fmt.Sprintf("YAML tag %q is not accepted in workspace files", clip(n.Tag))}
	}
	switch n.Kind {
	case yaml.ScalarNode:
		return nil
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if err := checkNode(c, depth+1); err != nil {
				return err
			}
		}
		return nil
	case yaml.MappingNode:
		seen := make(map[string]bool, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return &lineError{k.Line + fmLineOffset, "a YAML mapping key is not a plain value"}
			}
			if err := checkNode(k, depth+1); err != nil {
				return err
			}
			if seen[k.Value] {
				return &lineError{k.Line + fmLineOffset, fmt.Sprintf("field %q appears twice", clip(k.Value))}
			}
			seen[k.Value] = true
			if err := checkNode(n.Content[i+1], depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return &lineError{line, "unexpected YAML node"}
}

// encode writes the file: the front matter between delimiters, then the
// body as it was.
func (d *document) encode() ([]byte, error) {
	var buf bytes.Buffer
	buf.Write(delimiter)
	buf.WriteByte('\n')
	if err := encodeNode(&buf, d.node); err != nil {
		return nil, err
	}
	buf.Write(delimiter)
	buf.WriteByte('\n')
	buf.Write(d.body)
	return buf.Bytes(), nil
}

func encodeNode(w io.Writer, n *yaml.Node) error {
	keepValues(n)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return fmt.Errorf("encode YAML: %w", err)
	}
	return enc.Close()
}

// newDocument starts a file with an empty mapping and the given body.
func newDocument(body string) *document {
	root := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	return &document{node: &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}, root: root, body: []byte(body)}
}

// keepValues makes sure encoding does not change a value: yaml.v3 does
// not write every string back in the block style it was read in (a folded
// scalar that starts with an empty line loses it). A block scalar that
// would not read back as it is is written double-quoted instead.
func keepValues(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode {
		if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 && !roundTrips(n) {
			n.Style = yaml.DoubleQuotedStyle
		}
		return
	}
	for _, c := range n.Content {
		keepValues(c)
	}
}

// roundTrips reports whether a scalar encodes to text that decodes to the
// same value.
func roundTrips(n *yaml.Node) bool {
	probe := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{keyNode("v"), n}}
	out, err := yaml.Marshal(probe)
	if err != nil {
		return false
	}
	var back struct{ V *yaml.Node }
	if err := yaml.Unmarshal(out, &back); err != nil || back.V == nil {
		return false
	}
	return back.V.Value == n.Value && back.V.Tag == n.Tag
}
