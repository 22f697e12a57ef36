package reputation

import (
	"bytes"

	"gopkg.in/yaml.v3"
)

// signalsPlaceholder stands for the signals list while the rest of the
// front matter is encoded; see encodeAppending.
const signalsPlaceholder = "rdp-signals-list-kept-as-written-8b1f0c2e"

// encodeAppending returns the file with the given signal nodes appended to
// its signals list. Re-encoding thousands of signals would take most of
// the time of a write and could reformat them, so when the list is a block
// list in the usual layout its text is copied byte for byte from the file
// as read and the new items are added after it; the other fields are
// encoded from the nodes. Any other layout is encoded in full.
func (d *document) encodeAppending(items []*yaml.Node) ([]byte, error) {
	if d.block != nil {
		return d.appendToBlock(items)
	}
	if out, ok := d.splice(items); ok {
		return out, nil
	}
	seq := lookup(d.root, "signals")
	seq.Content = append(seq.Content, items...)
	if len(seq.Content) > 0 {
		seq.Style = 0
	}
	return d.encode()
}

// splice implements the copying path of encodeAppending; ok is false when
// the layout is not one it handles. It does not change d.
func (d *document) splice(items []*yaml.Node) (out []byte, ok bool) {
	if d.fm == nil || d.root.Style&yaml.FlowStyle != 0 || hasOtherLineBreak(d.fm) {
		return nil, false
	}
	idx := -1
	for i := 0; i+1 < len(d.root.Content); i += 2 {
		if d.root.Content[i].Value == "signals" {
			idx = i
			break
		}
	}
	if idx < 0 {
		return nil, false
	}
	key, seq := d.root.Content[idx], d.root.Content[idx+1]
	if seq.Kind != yaml.SequenceNode || seq.Style&yaml.FlowStyle != 0 || len(seq.Content) == 0 ||
		key.Column != 1 || key.Kind != yaml.ScalarNode || seq.Line <= key.Line {
		return nil, false
	}
	starts := lineStarts(d.fm)
	lineStart := func(line int) int { // 1-based front-matter line → offset
		if line-1 < len(starts) {
			return starts[line-1]
		}
		return len(d.fm)
	}
	from := lineStart(key.Line + 1)
	// The list runs to the next field that was in the file (fields added
	// since it was read have no line).
	to := len(d.fm)
	for i := idx + 2; i < len(d.root.Content); i += 2 {
		if l := d.root.Content[i].Line; l > key.Line {
			to = lineStart(l)
			break
		}
	}
	if from >= to {
		return nil, false
	}
	region := d.fm[from:to]
	// The list's own text ends with its last line that is neither blank
	// nor a comment. Trailing comments are left to the encoder, which
	// writes those the parser attached outside the list (before the next
	// field, at the end of the document); copying them too would double
	// them. A comment the parser attached to the last item's inside can
	// be lost; comments are never data.
	listEnd := len(region)
	for listEnd > 0 {
		i := bytes.LastIndexByte(region[:listEnd-1], '\n') + 1
		line := bytes.TrimSpace(region[i:listEnd])
		if len(line) != 0 && line[0] != '#' {
			break
		}
		listEnd = i
	}
	list := region[:listEnd]
	if len(list) == 0 || list[len(list)-1] != '\n' {
		return nil, false
	}
	// The first item's dash must be where the parser saw the list start.
	dashLine := lineStart(seq.Line)
	col := seq.Column - 1
	if dashLine < from || dashLine+col >= len(d.fm) || d.fm[dashLine+col] != '-' ||
		len(bytes.TrimLeft(d.fm[dashLine:dashLine+col], " ")) != 0 {
		return nil, false
	}

	placeholder := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: signalsPlaceholder}
	d.root.Content[idx+1] = placeholder
	var enc bytes.Buffer
	err := encodeNode(&enc, d.node)
	d.root.Content[idx+1] = seq
	if err != nil || bytes.Count(enc.Bytes(), []byte(signalsPlaceholder)) != 1 {
		return nil, false
	}
	e := enc.Bytes()
	p := bytes.Index(e, []byte(signalsPlaceholder))
	if p < 2 || string(e[p-2:p]) != ": " {
		return nil, false
	}
	eol := bytes.IndexByte(e[p:], '\n')
	if eol < 0 {
		return nil, false
	}
	eol += p + 1

	var added bytes.Buffer
	if err := encodeNode(&added, &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: items}); err != nil {
		return nil, false
	}
	indent := bytes.Repeat([]byte(" "), col)

	var b bytes.Buffer
	b.Grow(len(d.fm) + added.Len() + len(d.body) + 64)
	b.Write(delimiter)
	b.WriteByte('\n')
	b.Write(e[:p-2])
	b.WriteByte(':')
	b.Write(e[p+len(signalsPlaceholder) : eol])
	b.Write(list)
	for _, line := range bytes.SplitAfter(added.Bytes(), []byte("\n")) {
		if len(line) > 0 {
			b.Write(indent)
			b.Write(line)
		}
	}
	b.Write(e[eol:])
	b.Write(delimiter)
	b.WriteByte('\n')
	b.Write(d.body)
	return b.Bytes(), true
}

// hasOtherLineBreak reports whether b holds a line break other than
// "\n" and "\r\n": a lone "\r", or the Unicode breaks NEL, LS and PS,
// which the YAML parser counts as lines but lineStarts does not. Such a
// file is encoded in full rather than spliced by line numbers.
func hasOtherLineBreak(b []byte) bool {
	for i, c := range b {
		if c == '\r' && (i+1 == len(b) || b[i+1] != '\n') {
			return true
		}
	}
	return bytes.Contains(b, []byte("\u0085")) || bytes.Contains(b, []byte("\u2028")) || bytes.Contains(b, []byte("\u2029"))
}

// lineStarts returns the offset of the start of each line of b.
func lineStarts(b []byte) []int {
	starts := []int{0}
	for i, c := range b {
		if c == '\n' && i+1 < len(b) {
			starts = append(starts, i+1)
		}
	}
	return starts
}
