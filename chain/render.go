package chain

import (
	"strconv"
	"strings"

	"github.com/delegateos/delegateos/internal/render"
)

// Text renders a forest from Tree as lines for a person, one per
// delegation, children indented under their parent:
//
//	del_000000000001 root → alice  [completed]  ct_000000000001  depth 0  att_0123456789ab
//	└─ del_000000000002 alice → bob  [revoked]  ct_000000000001  depth 1
//
// name maps a principal ID to the name to show; nil, or an empty result,
// shows the ID. A string with anything but printable characters (a line
// break, a terminal escape, a bidirectional override, invalid UTF-8) is
// shown Go-quoted, so no record can forge or hide a line. Delegations that
// share an ID (chosen by whoever attenuated, so anyone may reuse one) are
// different delegations: each such line ends with the start of its key.
func Text(roots []*Node, name func(principalID string) string) []string {
	shared := sharedIDs(roots)
	var lines []string
	var walk func(n *Node, lead, branch string)
	walk = func(n *Node, lead, branch string) {
		line := textLine(&n.Delegation, name)
		if shared[n.Delegation.ID] {
			line += "  key " + printable(ShortKey(n.Delegation.Key))
		}
		lines = append(lines, lead+branch+line)
		switch branch {
		case "├─ ":
			lead += "│  "
		case "└─ ":
			lead += "   "
		}
		for i, c := range n.Children {
			b := "├─ "
			if i == len(n.Children)-1 {
				b = "└─ "
			}
			walk(c, lead, b)
		}
	}
	for _, r := range roots {
		walk(r, "", "")
	}
	return lines
}

// sharedIDs returns the IDs more than one delegation of the forest has.
func sharedIDs(roots []*Node) map[string]bool {
	seen, shared := map[string]bool{}, map[string]bool{}
	var walk func(n *Node)
	walk = func(n *Node) {
		id := n.Delegation.ID
		shared[id] = shared[id] || seen[id]
		seen[id] = true
		for _, c := range n.Children {
			walk(c)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	return shared
}

// ShortKey is the start of a delegation key, enough to tell delegations
// that share an ID apart on a screen.
func ShortKey(key string) string {
	if len(key) > 12 {
		return key[:12]
	}
	return key
}

func textLine(d *Delegation, name func(string) string) string {
	var b strings.Builder
	b.WriteString(printable(d.ID))
	b.WriteString(" ")
	b.WriteString(printable(principal(d.From, name)))
	b.WriteString(" → ")
	b.WriteString(printable(principal(d.To, name)))
	b.WriteString("  [")
	b.WriteString(printable(string(d.Status)))
	b.WriteString("]  ")
	b.WriteString(printable(d.ContractID))
	b.WriteString("  depth ")
	b.WriteString(strconv.FormatInt(d.Depth, 10))
	if d.AttestationID != "" {
		b.WriteString("  ")
		b.WriteString(printable(d.AttestationID))
	}
	return b.String()
}

func principal(id string, name func(string) string) string {
	if name != nil {
		if n := name(id); n != "" {
			return n
		}
	}
	return id
}

// printable is render.Printable: s, or s Go-quoted if it holds anything
// but printable characters.
func printable(s string) string { return render.Printable(s) }

// mermaidClasses styles a node by its status.
var mermaidClasses = []struct {
	status Status
	style  string
}{
	{StatusActive, "fill:#e3f2fd,stroke:#1e88e5,color:#0d47a1"},
	{StatusCompleted, "fill:#e8f5e9,stroke:#43a047,color:#1b5e20"},
	{StatusFailed, "fill:#ffebee,stroke:#e53935,color:#b71c1c"},
	{StatusRevoked, "fill:#eeeeee,stroke:#757575,color:#424242,stroke-dasharray:5 5"},
}

// Mermaid renders a forest from Tree as a Mermaid flowchart (graph TD),
// one node per delegation, an edge from each parent to each child, and a
// class per status (active blue, completed green, failed red, revoked grey
// and dashed; anything else yellow, as class unknown). name is as for Text.
//
// Node names are generated (d0, d1, ...), and every character of a label
// that comes from a record other than a letter, a digit, a space, '_', '-'
// or '.' is written as a Mermaid entity code (#35; for '#'), so no record
// can end a label, add a node or an edge, or inject markup.
func Mermaid(roots []*Node, name func(principalID string) string) string {
	shared := sharedIDs(roots)
	var b strings.Builder
	b.WriteString("graph TD\n")
	var class strings.Builder
	next := 0
	var walk func(n *Node) string
	walk = func(n *Node) string {
		id := "d" + strconv.Itoa(next)
		next++
		d := &n.Delegation
		b.WriteString("  " + id + `["`)
		b.WriteString(mermaidText(d.ID))
		if shared[d.ID] {
			b.WriteString(" key ")
			b.WriteString(mermaidText(ShortKey(d.Key)))
		}
		b.WriteString("<br/>")
		b.WriteString(mermaidText(principal(d.From, name)))
		b.WriteString(" #8594; ")
		b.WriteString(mermaidText(principal(d.To, name)))
		b.WriteString("<br/>")
		b.WriteString(mermaidText(d.ContractID))
		b.WriteString(" #183; depth " + strconv.FormatInt(d.Depth, 10))
		b.WriteString("<br/>")
		b.WriteString(mermaidText(string(d.Status)))
		if d.AttestationID != "" {
			b.WriteString(" #183; ")
			b.WriteString(mermaidText(d.AttestationID))
		}
		b.WriteString("\"]\n")
		class.WriteString("  class " + id + " " + mermaidClass(d.Status) + "\n")
		for _, c := range n.Children {
			cid := walk(c)
			b.WriteString("  " + id + " --> " + cid + "\n")
		}
		return id
	}
	for _, r := range roots {
		walk(r)
	}
	b.WriteString(class.String())
	for _, c := range mermaidClasses {
		b.WriteString("  classDef " + string(c.status) + " " + c.style + "\n")
	}
	b.WriteString("  classDef unknown fill:#fff8e1,stroke:#f9a825,color:#000000\n")
	return b.String()
}

func mermaidClass(s Status) string {
	for _, c := range mermaidClasses {
		if c.status == s {
			return string(s)
		}
	}
	return "unknown"
}

// mermaidText is render.MermaidText: s with every character but ASCII
// letters, digits, space, '_', '-' and '.' written as an entity code.
func mermaidText(s string) string { return render.MermaidText(s) }
