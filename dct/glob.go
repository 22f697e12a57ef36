package dct

import "strings"

// Resource patterns (§10.2) are split on '/' into segments. A segment that
// is exactly "*" matches one segment, exactly "**" matches zero or more
// segments, and any other segment matches only itself ('*' inside a longer
// segment is literal, as in the reference implementation). A whole pattern
// of "*" or "**" matches anything.
//
// Wildcards never match a "." or ".." segment, so "/project/**" does not
// match "/project/../secret"; such a resource is granted only by a pattern
// that names those segments literally or by the universal pattern.

func isUniversal(pattern string) bool { return pattern == "*" || pattern == "**" }

func isDotSegment(s string) bool { return s == "." || s == ".." }

// MatchResource reports whether a resource pattern matches a concrete resource.
func MatchResource(pattern, resource string) bool {
	if isUniversal(pattern) || pattern == resource && !hasDotSegment(resource) {
		return true
	}
	if len(pattern) > MaxResourceLen || len(resource) > MaxResourceLen {
		return false
	}
	p, r := strings.Split(pattern, "/"), strings.Split(resource, "/")
	if matchSegments(p, r) {
		return true
	}
	// Backtracking to the last "**" is exact for one "**"; with several, the
	// positions where a "**" may not absorb a segment make it incomplete,
	// so a rejection is confirmed by the exact (memoized) search.
	if strings.Count(pattern, "**") < 2 || len(p) > MaxResourceSegments {
		return false
	}
	m := matcher{p: p, r: r, memo: make([]int8, (len(p)+1)*(len(r)+1))}
	return m.match(0, 0)
}

type matcher struct {
	p, r []string
	memo []int8 // 0 unknown, 1 true, 2 false
}

func (m *matcher) match(i, j int) bool {
	k := i*(len(m.r)+1) + j
	if m.memo[k] != 0 {
		return m.memo[k] == 1
	}
	var ok bool
	switch {
	case i == len(m.p):
		ok = j == len(m.r)
	case m.p[i] == "**":
		ok = m.match(i+1, j) || j < len(m.r) && wildOK(m.r[j], j, len(m.r), true) && m.match(i, j+1)
	case j == len(m.r):
		ok = false
	default:
		ok = segmentMatches(m.p[i], m.r, j) && m.match(i+1, j+1)
	}
	m.memo[k] = 2
	if ok {
		m.memo[k] = 1
	}
	return ok
}

func hasDotSegment(resource string) bool {
	if !strings.Contains(resource, ".") {
		return false
	}
	for _, s := range strings.Split(resource, "/") {
		if isDotSegment(s) {
			return true
		}
	}
	return false
}

// matchSegments matches with backtracking on "**" only at its last
// occurrence, which is linear for the single-"**" patterns people write and
// at worst O(len(p)·len(r)).
func matchSegments(p, r []string) bool {
	pi, ri := 0, 0
	starP, starR := -1, 0
	for ri < len(r) {
		switch {
		case pi < len(p) && p[pi] == "**":
			starP, starR = pi, ri
			pi++
		case pi < len(p) && segmentMatches(p[pi], r, ri):
			pi++
			ri++
		case starP >= 0 && wildOK(r[starR], starR, len(r), true):
			// Let the last "**" absorb one more segment and retry.
			starR++
			pi, ri = starP+1, starR
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == "**" {
		pi++
	}
	return pi == len(p)
}

func segmentMatches(p string, r []string, i int) bool {
	if p == "*" {
		return wildOK(r[i], i, len(r), false)
	}
	return p == r[i]
}

// wildOK reports whether a wildcard ("**" when globstar) may match segment
// seg at index i of n. Dot segments never; an empty segment only as the
// first of an absolute path, or, for "**", as the last (the directory
// itself, "/project/"). An empty segment inside a path never:
// "/project/*/*" must not grant "/project//secret.md", which a server
// reads as "/project/secret.md".
func wildOK(seg string, i, n int, globstar bool) bool {
	if isDotSegment(seg) {
		return false
	}
	return seg != "" || i == 0 || globstar && i == n-1
}

// ResourceSubset reports whether every resource the child pattern matches is
// matched by the parent pattern. It is sound but not complete: when it
// cannot prove inclusion it reports false, and narrowing is refused.
func ResourceSubset(child, parent string) bool {
	if isUniversal(parent) {
		return true
	}
	if isUniversal(child) {
		return false
	}
	if child == parent {
		return true
	}
	// MatchResource matches no over-long pattern, so nothing can be proved
	// about one: a long parent would otherwise "contain" a child it cannot match.
	if len(child) > MaxResourceLen || len(parent) > MaxResourceLen {
		return false
	}
	c, p := strings.Split(child, "/"), strings.Split(parent, "/")
	if len(c) > MaxResourceSegments || len(p) > MaxResourceSegments {
		return false
	}
	s := subsetSolver{c: c, p: p, memo: make([]int8, (len(c)+1)*(len(p)+1))}
	return s.subset(0, 0)
}

type subsetSolver struct {
	c, p []string
	memo []int8 // 0 unknown, 1 true, 2 false
}

// subset decides L(c[i:]) ⊆ L(p[j:]). Each rule is a sufficient condition,
// so a true answer is a proof; memoization keeps it O(len(c)·len(p)).
func (s *subsetSolver) subset(i, j int) bool {
	k := i*(len(s.p)+1) + j
	if s.memo[k] != 0 {
		return s.memo[k] == 1
	}
	r := s.decide(i, j)
	if r {
		s.memo[k] = 1
	} else {
		s.memo[k] = 2
	}
	return r
}

func (s *subsetSolver) decide(i, j int) bool {
	if j == len(s.p) {
		return i == len(s.c)
	}
	if i == len(s.c) {
		// The child matches only the empty remainder; the parent must too.
		for _, seg := range s.p[j:] {
			if seg != "**" {
				return false
			}
		}
		return true
	}
	cs, ps := s.c[i], s.p[j]
	switch ps {
	case "**":
		// Parent "**" matches nothing here, or absorbs the child's segment
		// (a child "**" is absorbed whole, since "**" repeats).
		if s.subset(i, j+1) {
			return true
		}
		return wildOK(cs, i, len(s.c), true) && s.subset(i+1, j)
	case "*":
		return cs != "**" && wildOK(cs, i, len(s.c), false) && s.subset(i+1, j+1)
	default:
		return cs == ps && s.subset(i+1, j+1)
	}
}

// matchWildcard matches a namespace or action: "*" in a capability grants
// any value.
func matchWildcard(granted, requested string) bool { return granted == "*" || granted == requested }

// Covers reports whether c grants the requested namespace, action and resource.
func (c Capability) Covers(namespace, action, resource string) bool {
	return matchWildcard(c.Namespace, namespace) && matchWildcard(c.Action, action) && MatchResource(c.Resource, resource)
}

// SubsetOf reports whether c grants nothing that parent does not.
func (c Capability) SubsetOf(parent Capability) bool {
	return subsetName(c.Namespace, parent.Namespace) && subsetName(c.Action, parent.Action) && ResourceSubset(c.Resource, parent.Resource)
}

func subsetName(child, parent string) bool { return parent == "*" || child == parent }

// capsSubset reports whether every capability in child is a subset of some
// capability in parent, and names the first that is not.
func capsSubset(child, parent []Capability) (Capability, bool) {
	for _, c := range child {
		ok := false
		for _, p := range parent {
			if c.SubsetOf(p) {
				ok = true
				break
			}
		}
		if !ok {
			return c, false
		}
	}
	return Capability{}, true
}
