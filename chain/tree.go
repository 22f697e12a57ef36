package chain

import (
	"cmp"
	"slices"
	"time"
)

// Node is a delegation and the delegations made under it.
type Node struct {
	Delegation Delegation
	// Children are sorted by CreatedAt, then ID.
	Children []*Node
}

// Tree arranges delegations as a forest and returns its roots, sorted like
// children by CreatedAt, then ID. A delegation whose parent is not among
// ds is a root too, so a partial list loses nothing. Records are linked by
// key (a record without one, not from a Store, by ID): two delegations
// with the same ID are two nodes. ds need not come from a Store: of
// records with the same key the first is used, and should the parent
// links form a cycle, it is cut at its earliest record, which becomes a
// root.
func Tree(ds []Delegation) []*Node {
	nodes := make(map[string]*Node, len(ds))
	all := make([]*Node, 0, len(ds))
	for _, d := range ds {
		self, _ := links(&d)
		if _, dup := nodes[self]; dup {
			continue
		}
		n := &Node{Delegation: d}
		nodes[self] = n
		all = append(all, n)
	}
	slices.SortStableFunc(all, compareNodes)
	parent := func(n *Node) *Node {
		self, up := links(&n.Delegation)
		if up == self {
			return nil
		}
		return nodes[up]
	}
	var roots []*Node
	for _, n := range all {
		if p := parent(n); p != nil {
			p.Children = append(p.Children, n)
		} else {
			roots = append(roots, n)
		}
	}
	// Whatever the roots do not reach lies on a cycle or under one.
	reached := make(map[*Node]bool, len(all))
	for _, r := range roots {
		mark(r, reached)
	}
	for _, n := range all {
		if reached[n] {
			continue
		}
		first := earliestOnCycle(n, parent)
		p := parent(first)
		p.Children = slices.DeleteFunc(p.Children, func(c *Node) bool { return c == first })
		roots = append(roots, first)
		mark(first, reached)
	}
	slices.SortStableFunc(roots, compareNodes)
	return roots
}

// links returns what names a record and its parent in a Tree: the keys,
// or the IDs of a record that has no key.
func links(d *Delegation) (self, parent string) {
	if d.Key != "" {
		return "k" + d.Key, "k" + d.ParentKey
	}
	return "i" + d.ID, "i" + d.ParentID
}

// earliestOnCycle returns the earliest node of the cycle that n's parent
// links lead to.
func earliestOnCycle(n *Node, parent func(*Node) *Node) *Node {
	seen := map[*Node]bool{}
	for !seen[n] {
		seen[n] = true
		n = parent(n)
	}
	// n is on the cycle now.
	first := n
	for c := parent(n); c != n; c = parent(c) {
		if compareNodes(c, first) < 0 {
			first = c
		}
	}
	return first
}

func mark(n *Node, reached map[*Node]bool) {
	reached[n] = true
	for _, c := range n.Children {
		mark(c, reached)
	}
}

func compareNodes(a, b *Node) int {
	if c := createdAt(a).Compare(createdAt(b)); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Delegation.ID, b.Delegation.ID); c != 0 {
		return c
	}
	return cmp.Compare(a.Delegation.Key, b.Delegation.Key)
}

// createdAt is the node's creation time; a record that has none that
// parses sorts first.
func createdAt(n *Node) time.Time {
	t, err := parseTime(n.Delegation.CreatedAt)
	if err != nil {
		return time.Time{}
	}
	return t
}
