// Package render writes strings that come from tokens, records and other
// untrusted input where a person or a diagram tool will read them: a
// terminal line (Printable), a name or a detail inside a message (Name,
// Escaped) and a quoted Mermaid label (MermaidText). Both
// are total functions of their input, so no string, however hostile, can
// forge a line of text or a node, edge or directive of a diagram.
package render
