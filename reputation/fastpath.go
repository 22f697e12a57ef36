package reputation

import (
	"bytes"
	"math"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/delegateos/delegateos/internal/timestamp"
)

// Parsing thousands of signals as YAML nodes takes most of the time of
// reading or recording into a large profile. parseProfileFast reads the
// signals list of a profile laid out as this package writes it with a
// line scanner instead, and the rest of the front matter as YAML. It
// accepts only that layout, and only valid signals in it; for any other
// text it reports false and the caller parses the whole file as YAML, so
// that both paths give the same profile and the same problems.
//
// The layout is a top-level "signals:" line followed by items of the form
//
//	  - source: "did:..."
//	    dimension: "..."
//	    domain: "..."        (optional)
//	    score: 0.5
//	    timestamp: "..."
//	    evidence: "..."      (optional)
//	    message: "..."       (optional)
//
// with every field at most once, strings double-quoted and made of
// printable ASCII without '"' or '\' (so the quoted text is the value),
// and no blank lines, comments or other fields.

// parseProfileFast parses a profile file in the layout above; ok is false
// when the file is not in it, holds an invalid value, or would give any
// problem, warnings included.
func parseProfileFast(data []byte, slug string) (lp *loadedProfile, ok bool) {
	if len(data) > MaxFileSize {
		return nil, false
	}
	// The front matter is split as splitFrontMatter splits it, without
	// going over the signals list twice: no line of the list can close
	// the front matter (they all start with a space), so the closing line
	// is looked for before the list and after it.
	first, rest, found := cutLine(data)
	if !found || !bytes.Equal(first, delimiter) {
		return nil, false
	}
	start := len(data) - len(rest)
	const key = "signals:\n"
	at := start
	if !bytes.HasPrefix(data[start:], []byte(key)) {
		i := bytes.Index(data[start:], []byte("\n"+key))
		if i < 0 {
			return nil, false
		}
		at = start + i + 1
	}
	if closingLine(data[start:at]) >= 0 {
		return nil, false // the list is after the front matter
	}
	from := at + len(key)
	signals, size, ok := scanSignals(data[from:])
	if !ok || len(signals) == 0 {
		return nil, false
	}
	to := from + size
	end := closingLine(data[to:])
	if end < 0 {
		return nil, false
	}
	end += to
	_, body, _ := cutLine(data[end:])
	block := data[from:to]
	head, tail := data[start:at], data[to:end]
	// The list is printable ASCII; the rest must hold no other line
	// break than "\n" (as splice requires) and no placeholder.
	for _, part := range [][]byte{head, tail} {
		if bytes.IndexByte(part, '\r') >= 0 || hasOtherLineBreak(part) || bytes.Contains(part, []byte(signalsPlaceholder)) {
			return nil, false
		}
	}
	reduced := make([]byte, 0, len(head)+len(tail)+len(signalsPlaceholder)+16)
	reduced = append(reduced, head...)
	reduced = append(reduced, "signals: "+signalsPlaceholder+"\n"...)
	reduced = append(reduced, tail...)
	doc, err := parseFrontMatter(reduced, body)
	if err != nil {
		return nil, false
	}
	// The placeholder occurs once, so a plain top-level signals value equal
	// to it is the line put in place of the list.
	n := lookup(doc.root, "signals")
	if n == nil || n.Kind != yaml.ScalarNode || n.Tag != "!!str" || n.Style != 0 || n.Value != signalsPlaceholder {
		return nil, false
	}
	doc.block, doc.signals = block, signals
	d := &decoder{file: rel(ProfilesDir, slug)}
	p := d.decodeProfile(doc, slug)
	if len(d.problems) != 0 {
		return nil, false
	}
	return &loadedProfile{p: p, doc: doc}, true
}

// scanSignals reads the items of a signals list in the layout of
// parseProfileFast, up to the first line that does not start with a space
// (n bytes), and checks them as decodeSignal does; ok is false at the
// first line or value that does not fit.
func scanSignals(text []byte) (signals []Signal, n int, ok bool) {
	block := text
	// Room for the signals (the package writes some 230 bytes each), and
	// for what a log and a record add, without counting them first.
	signals = make([]Signal, 0, len(text)/160+logMaxEntries+MaxSignalsPerRecord)
	// The strings are cut from one copy of the text, not allocated one by
	// one: b is a slice of text, so its offset is what its capacity lacks.
	all := string(text)
	str := func(_ int, b []byte) string {
		off := cap(text) - cap(b)
		return all[off : off+len(b)]
	}
	// Consecutive signals mostly repeat their source: it is checked again
	// only when it changes.
	validSource := ""
	var days dayCache
	var s Signal
	seen := 0
	done := func() bool {
		if seen == 0 {
			return true
		}
		if seen&15 != 15 {
			return false
		}
		if s.Source != validSource || validSource == "" {
			if len(s.Source) > MaxIDLen || !ValidDID(s.Source) {
				return false
			}
			validSource = s.Source
		}
		if !fastValid(s) {
			return false
		}
		signals = append(signals, s)
		return true
	}
	for len(block) > 0 && block[0] == ' ' {
		nl := bytes.IndexByte(block, '\n')
		if nl < 0 {
			return nil, 0, false
		}
		line := block[:nl]
		block = block[nl+1:]
		switch {
		case len(line) > 4 && line[0] == ' ' && line[1] == ' ' && line[2] == '-' && line[3] == ' ':
			if !done() {
				return nil, 0, false
			}
			s, seen = Signal{}, 0
		case len(line) > 4 && line[0] == ' ' && line[1] == ' ' && line[2] == ' ' && line[3] == ' ' && seen != 0:
		default:
			return nil, 0, false
		}
		line = line[4:]
		// Field names are short: look for the colon by hand.
		colon := -1
		for j := 0; j < len(line) && j < 12; j++ {
			if line[j] == ':' {
				colon = j
				break
			}
		}
		if colon < 0 || colon+1 >= len(line) || line[colon+1] != ' ' {
			return nil, 0, false
		}
		k, v := line[:colon], line[colon+2:]
		var bit int
		switch string(k) {
		case "source":
			bit = 1
		case "dimension":
			bit = 2
		case "score":
			bit = 4
		case "timestamp":
			bit = 8
		case "domain":
			bit = 16
		case "evidence":
			bit = 32
		case "message":
			bit = 64
		}
		if bit == 0 || seen&bit != 0 {
			return nil, 0, false
		}
		seen |= bit
		if bit == 4 {
			f, ok := fastScore(v)
			if !ok {
				return nil, 0, false
			}
			s.Score = f
			continue
		}
		if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
			return nil, 0, false
		}
		v = v[1 : len(v)-1]
		for _, c := range v {
			if !plainASCII[c] {
				return nil, 0, false
			}
		}
		switch bit {
		case 1:
			s.Source = str(0, v)
		case 2:
			s.Dimension = str(1, v)
		case 8:
			if len(v) > 64 {
				return nil, 0, false
			}
			t, ok := days.fastTime(v)
			if !ok {
				parsed, err := timestamp.Parse(string(v))
				if err != nil {
					return nil, 0, false
				}
				t = truncate(parsed)
			}
			s.Timestamp = t
		case 16:
			s.Domain = str(4, v)
		case 32:
			s.Evidence = str(5, v)
		case 64:
			s.Message = str(6, v)
		}
	}
	if !done() {
		return nil, 0, false
	}
	return signals, len(text) - len(block), true
}

// fastScore reads a plain score of the form 0, 1 or [01].digits, which
// YAML reads as an integer or a float.
func fastScore(v []byte) (float64, bool) {
	if len(v) == 0 || len(v) > 32 || v[0] != '0' && v[0] != '1' {
		return 0, false
	}
	if len(v) > 1 {
		if v[1] != '.' || len(v) == 2 {
			return 0, false
		}
		for _, c := range v[2:] {
			if c < '0' || c > '9' {
				return 0, false
			}
		}
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.IsNaN(f) || !validScore(f) {
		return 0, false
	}
	return f, true
}

// plainASCII marks the bytes a scanned string may hold: printable ASCII
// but '"' and '\\'.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// dayCache remembers the last date fastTime read: consecutive signals
// are mostly from the same day.
type dayCache struct {
	date     [10]byte
	midnight time.Time
}

// fastTime is the package function fastTime, reusing the date of the
// previous call when it is the same.
func (c *dayCache) fastTime(v []byte) (time.Time, bool) {
	if len(v) != 24 || c.midnight.IsZero() || string(v[:10]) != string(c.date[:]) {
		t, ok := fastTime(v)
		if ok {
			copy(c.date[:], v[:10])
			c.midnight = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		}
		return t, ok
	}
	const layout = "Tdd:dd:dd.dddZ"
	rest := v[10:]
	for i := range len(layout) {
		if layout[i] == 'd' && (rest[i] < '0' || rest[i] > '9') || layout[i] != 'd' && rest[i] != layout[i] {
			return time.Time{}, false
		}
	}
	num := func(i, n int) int {
		x := 0
		for _, d := range rest[i : i+n] {
			x = x*10 + int(d-'0')
		}
		return x
	}
	hour, minute, sec, ms := num(1, 2), num(4, 2), num(7, 2), num(10, 3)
	if hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	return c.midnight.Add(time.Duration(hour)*time.Hour + time.Duration(minute)*time.Minute +
		time.Duration(sec)*time.Second + time.Duration(ms)*time.Millisecond), true
}

// fastTime reads a timestamp in the form timestamp.Format writes,
// "2006-01-02T15:04:05.000Z", as timestamp.Parse would; ok is false for
// any other text, which the caller gives to timestamp.Parse.
func fastTime(v []byte) (t time.Time, ok bool) {
	const layout = "dddd-dd-ddTdd:dd:dd.dddZ"
	if len(v) != len(layout) {
		return time.Time{}, false
	}
	for i := range len(layout) {
		if layout[i] == 'd' && (v[i] < '0' || v[i] > '9') || layout[i] != 'd' && v[i] != layout[i] {
			return time.Time{}, false
		}
	}
	num := func(i, n int) int {
		x := 0
		for _, c := range v[i : i+n] {
			x = x*10 + int(c-'0')
		}
		return x
	}
	year, month, day := num(0, 4), time.Month(num(5, 2)), num(8, 2)
	hour, minute, sec, ms := num(11, 2), num(14, 2), num(17, 2), num(20, 3)
	if month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	// time.Date normalizes a day past the month's end; time.Parse refuses it.
	if day > time.Date(year, month+1, 0, 0, 0, 0, 0, time.UTC).Day() {
		return time.Time{}, false
	}
	return time.Date(year, month, day, hour, minute, sec, ms*int(time.Millisecond), time.UTC), true
}

// fastValid applies decodeSignal's checks to a scanned signal, whose
// strings are printable ASCII (so only their lengths and forms remain);
// scanSignals checks the source.
func fastValid(s Signal) bool {
	switch {
	case s.Dimension == "" || len(s.Dimension) > MaxNameLen,
		len(s.Domain) > MaxNameLen,
		len(s.Evidence) > MaxIDLen,
		len(s.Message) > MaxTextLen,
		s.Dimension == DomainCompetence && s.Domain == "":
		return false
	}
	return true
}

// appendToBlock is encodeAppending for a document read by
// parseProfileFast: the other fields are encoded from the nodes, the
// signals list is copied as read and the new items follow it.
func (d *document) appendToBlock(items []*yaml.Node) ([]byte, error) {
	var enc bytes.Buffer
	if err := encodeNode(&enc, d.node); err != nil {
		return nil, err
	}
	e := enc.Bytes()
	p := bytes.Index(e, []byte(signalsPlaceholder))
	eol := bytes.IndexByte(e[max(p, 0):], '\n')
	if p < 2 || string(e[p-2:p]) != ": " || eol < 0 || bytes.Count(e, []byte(signalsPlaceholder)) != 1 {
		// Not the expected text: encode the list from the signals.
		seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, s := range d.signals {
			seq.Content = append(seq.Content, s.node())
		}
		seq.Content = append(seq.Content, items...)
		setKey(d.root, "signals", seq)
		d.block, d.signals = nil, nil
		return d.encode()
	}
	eol += p + 1
	var added bytes.Buffer
	if err := encodeNode(&added, &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: items}); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(len(e) + len(d.block) + 2*added.Len() + len(d.body) + 16)
	b.Write(delimiter)
	b.WriteByte('\n')
	b.Write(e[:p-2])
	b.WriteByte(':')
	b.Write(e[p+len(signalsPlaceholder) : eol])
	b.Write(d.block)
	for _, line := range bytes.SplitAfter(added.Bytes(), []byte("\n")) {
		if len(line) > 0 {
			b.WriteString("  ")
			b.Write(line)
		}
	}
	b.Write(e[eol:])
	b.Write(delimiter)
	b.WriteByte('\n')
	b.Write(d.body)
	return b.Bytes(), nil
}
