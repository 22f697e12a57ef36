package render

import "strconv"

// MermaidText returns s for use inside a quoted Mermaid label (["..."]):
// ASCII letters, digits, space, '_', '-' and '.' as they are, and every
// other character (each byte of invalid UTF-8 as U+FFFD) as a decimal
// entity code such as #35; for '#'. The result holds no quote, bracket,
// line break, '<', '>', '&', '|', '%' or backquote, so it can neither end
// the label nor carry markup, and Mermaid shows the original characters.
func MermaidText(s string) string {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == ' ' || r == '_' || r == '-' || r == '.' {
			b = append(b, byte(r))
			continue
		}
		b = append(b, '#')
		b = strconv.AppendInt(b, int64(r), 10)
		b = append(b, ';')
	}
	return string(b)
}
