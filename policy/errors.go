package policy

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnmappable is wrapped by every error Map returns: the call cannot be
// mapped to a capability, so it must be denied.
var ErrUnmappable = errors.New("the call cannot be mapped to a capability")

// Error is one problem in a policy file.
type Error struct {
	// File is the policy file's path as given to Load; "" from Parse.
	File string
	// Line is 1-based; 0 when the problem has no line (an empty document).
	Line int
	// Column is 1-based, in characters; 0 when not known (it is given
	// for YAML syntax errors).
	Column int
	// Key locates the value, e.g. "tools[1].cost"; "" for the document.
	Key string
	Msg string
}

func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0 && e.Column > 0:
		fmt.Fprintf(&b, "%s:%d:%d: ", e.File, e.Line, e.Column)
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		fmt.Fprintf(&b, "%s: ", e.File)
	case e.Line > 0 && e.Column > 0:
		fmt.Fprintf(&b, "line %d, column %d: ", e.Line, e.Column)
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem Parse found, in file order (at most a few dozen).
type Errors []*Error

// Error describes the first problem and counts the others.
func (es Errors) Error() string {
	switch len(es) {
	case 0:
		return "no problems"
	case 1:
		return es[0].Error()
	case 2:
		return es[0].Error() + " (and 1 more problem)"
	}
	return fmt.Sprintf("%s (and %d more problems)", es[0].Error(), len(es)-1)
}

// Unwrap returns each problem, for errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}
