package chain

import (
	"slices"
	"strings"
	"testing"
)

// shape writes a forest as "id(child child) id(...)" for comparisons.
func shape(ns []*Node) string {
	var parts []string
	for _, n := range ns {
		s := n.Delegation.ID[len("del_00000000"):]
		if len(n.Children) > 0 {
			s += "(" + shape(n.Children) + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func node(id, parent int, minutes int) Delegation {
	p := "del_000000000000"
	if parent > 0 {
		p = delID(parent)
	}
	return Delegation{ID: delID(id), ParentID: p, CreatedAt: ts(minutes)}
}

func TestTree(t *testing.T) {
	cases := []struct {
		name string
		ds   []Delegation
		want string
	}{
		{"empty", nil, ""},
		{"one", []Delegation{node(1, 0, 0)}, "0001"},
		{
			"children by time then id",
			[]Delegation{node(4, 1, 3), node(1, 0, 0), node(3, 1, 2), node(2, 1, 2), node(5, 2, 9)},
			"0001(0002(0005) 0003 0004)",
		},
		{
			"roots by time then id",
			[]Delegation{node(3, 0, 1), node(2, 0, 1), node(1, 0, 5)},
			"0002 0003 0001",
		},
		{"orphan is a root", []Delegation{node(7, 6, 0), node(1, 0, 1)}, "0007 0001"},
		{"first of a repeated id", []Delegation{node(1, 0, 0), node(2, 1, 1), {ID: delID(2), ParentID: delID(9), CreatedAt: ts(0)}}, "0001(0002)"},
		{"unparsable time sorts first", []Delegation{node(1, 0, 0), {ID: delID(2), ParentID: "del_000000000000", CreatedAt: "soon"}}, "0002 0001"},
		{"own parent", []Delegation{{ID: delID(1), ParentID: delID(1), CreatedAt: ts(0)}}, "0001"},
		{
			"cycle cut at its earliest",
			[]Delegation{node(1, 3, 5), node(2, 1, 1), node(3, 2, 3), node(4, 2, 0), node(9, 0, 9)},
			"0002(0004 0003(0001)) 0009",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Tree(c.ds)
			if s := shape(got); s != c.want {
				t.Fatalf("Tree: %q; want %q", s, c.want)
			}
			// Every distinct ID appears once.
			seen := map[string]int{}
			var count func([]*Node)
			count = func(ns []*Node) {
				for _, n := range ns {
					seen[n.Delegation.ID]++
					count(n.Children)
				}
			}
			count(got)
			for _, d := range c.ds {
				if seen[d.ID] != 1 {
					t.Fatalf("%s appears %d times", d.ID, seen[d.ID])
				}
			}
		})
	}
}

func names(id string) string {
	return map[string]string{rootKey.ID(): "root", aliceKey.ID(): "alice", bobKey.ID(): "bob", carolKey.ID(): "carol", daveKey.ID(): "dave"}[id]
}

func TestText(t *testing.T) {
	ds := subtree(t)
	s := NewMemory()
	for _, n := range []string{"R", "A", "B", "C", "D", "E"} {
		mustInsert(t, s, ds[n])
	}
	if err := s.Complete(ds["B"].ID, attID, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke(ds["D"].ID, t0); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"del_000000000001 root → alice  [active]  ct_000000000001  depth 0",
		"├─ del_000000000002 alice → bob  [active]  ct_000000000001  depth 1",
		"│  ├─ del_000000000003 bob → carol  [completed]  ct_000000000001  depth 2  att_0123456789ab",
		"│  │  └─ del_000000000004 carol → dave  [active]  ct_000000000001  depth 3",
		"│  └─ del_000000000005 bob → dave  [revoked]  ct_000000000001  depth 2",
		"└─ del_000000000006 alice → carol  [active]  ct_000000000001  depth 1",
	}
	got := Text(Tree(mustList(t, s)), names)
	if !slices.Equal(got, want) {
		t.Fatalf("Text:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Without names, the principal IDs.
	if line := Text(Tree(mustList(t, s)), nil)[0]; line != "del_000000000001 "+rootKey.ID()+" → "+aliceKey.ID()+"  [active]  ct_000000000001  depth 0" {
		t.Fatalf("Text without names: %s", line)
	}
}

// Strings that could forge or hide a line are shown quoted.
func TestTextEscapes(t *testing.T) {
	d := Delegation{ID: delID(1), ParentID: "del_000000000000", From: "a", To: "b", Status: StatusActive, CreatedAt: ts(0)}
	for _, s := range []string{"ct\nfake line", "ct\x1b[2Jclear", "ct\u202eevil", "ct\xff", "ct\u00a0", "", "ct\u2028x"} {
		d.ContractID = s
		line := Text(Tree([]Delegation{d}), func(string) string { return "x\ny" })[0]
		for _, r := range line {
			if r == '\n' || r == '\x1b' || r == '\u202e' || r == '\u2028' || r == '\u00a0' {
				t.Fatalf("contract %q: line %q holds %q", s, line, r)
			}
		}
		if !strings.Contains(line, `"x\ny"`) {
			t.Fatalf("name not quoted: %q", line)
		}
		if s != "" && !strings.Contains(line, `"ct`) {
			t.Fatalf("contract %q not quoted: %q", s, line)
		}
	}
	d.ContractID = "ct plain, [ok]"
	if line := Text(Tree([]Delegation{d}), nil)[0]; !strings.Contains(line, "  ct plain, [ok]  ") {
		t.Fatalf("printable contract changed: %q", line)
	}
}

func TestMermaid(t *testing.T) {
	ds := subtree(t)
	s := NewMemory()
	for _, n := range []string{"R", "A", "B", "E"} {
		mustInsert(t, s, ds[n])
	}
	if err := s.Complete(ds["B"].ID, attID, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.Fail(ds["E"].ID, "", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke(ds["A"].ID, t0); err != nil {
		t.Fatal(err)
	}
	want := `graph TD
  d0["del_000000000001<br/>root #8594; alice<br/>ct_000000000001 #183; depth 0<br/>active"]
  d1["del_000000000002<br/>alice #8594; bob<br/>ct_000000000001 #183; depth 1<br/>revoked"]
  d2["del_000000000003<br/>bob #8594; carol<br/>ct_000000000001 #183; depth 2<br/>completed #183; att_0123456789ab"]
  d1 --> d2
  d0 --> d1
  d3["del_000000000006<br/>alice #8594; carol<br/>ct_000000000001 #183; depth 1<br/>failed"]
  d0 --> d3
  class d0 active
  class d1 revoked
  class d2 completed
  class d3 failed
  classDef active fill:#e3f2fd,stroke:#1e88e5,color:#0d47a1
  classDef completed fill:#e8f5e9,stroke:#43a047,color:#1b5e20
  classDef failed fill:#ffebee,stroke:#e53935,color:#b71c1c
  classDef revoked fill:#eeeeee,stroke:#757575,color:#424242,stroke-dasharray:5 5
  classDef unknown fill:#fff8e1,stroke:#f9a825,color:#000000
`
	if got := Mermaid(Tree(mustList(t, s)), names); got != want {
		t.Fatalf("Mermaid:\n%s\nwant:\n%s", got, want)
	}
}

// No record string can end a label or add a line to the diagram.
func TestMermaidEscapes(t *testing.T) {
	evil := "ct\"]\n  x --> y\n  click d0 call alert(1)\n%%<script>#quot;`"
	d := Delegation{ID: delID(1), ParentID: "del_000000000000", From: evil, To: evil, ContractID: evil, Status: Status(evil), AttestationID: evil, CreatedAt: ts(0)}
	out := Mermaid(Tree([]Delegation{d}), nil)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 8 || lines[0] != "graph TD" || lines[2] != "  class d0 unknown" {
		t.Fatalf("the diagram's lines changed:\n%s", out)
	}
	label := strings.TrimSuffix(strings.TrimPrefix(lines[1], `  d0["`), `"]`)
	checkMermaidLabel(t, strings.ReplaceAll(label, "<br/>", ""))
}

// checkMermaidLabel fails unless label holds only the characters
// mermaidText writes and well-formed entity codes.
func checkMermaidLabel(t *testing.T, label string) {
	t.Helper()
	for i := 0; i < len(label); i++ {
		c := label[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == ' ', c == '_', c == '-', c == '.':
		case c == '#':
			j := i + 1
			for j < len(label) && '0' <= label[j] && label[j] <= '9' {
				j++
			}
			if j == i+1 || j == len(label) || label[j] != ';' {
				t.Fatalf("malformed entity code at %d in %q", i, label)
			}
			i = j
		default:
			t.Fatalf("raw %q at %d in %q", c, i, label)
		}
	}
}
