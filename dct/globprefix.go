package dct

import "strings"

// MatchResourcePrefix reports whether pattern matches some resource that
// begins with prefix: whether there is a string s such that
// MatchResource(pattern, prefix+s). It decides the question exactly, under
// the same rules as MatchResource (dot and empty segments, the length
// limit), so a caller that shows a family of resources by its common
// prefix — a URI template's literal text before its first expression —
// hides it only when no member of the family could be granted.
func MatchResourcePrefix(pattern, prefix string) bool {
	_, ok := resourcePrefixWitness(pattern, prefix)
	return ok
}

// resourcePrefixWitness returns the shortest resource the segment walk
// finds that begins with prefix and that pattern matches, and whether there
// is one.
//
// The prefix's segments but its last are whole segments of the resource;
// its last segment may be extended, and more segments appended. The walk
// keeps the set of pattern positions that can be reached after each whole
// segment; at the last, open segment, each reachable position is finished
// as cheaply as it can be: a literal segment must begin with what the
// prefix holds of it, a wildcard takes the open segment (made non-empty and
// not a dot segment with an "x" when it must be), and the rest of the
// pattern is written out with "x" for each "*" and nothing for "**".
func resourcePrefixWitness(pattern, prefix string) (string, bool) {
	if isUniversal(pattern) {
		return prefix, true
	}
	if len(pattern) > MaxResourceLen {
		// Only the equality shortcut of MatchResource applies.
		return pattern, strings.HasPrefix(pattern, prefix) && !hasDotSegment(pattern)
	}
	if len(prefix) > MaxResourceLen {
		return "", false
	}
	p := strings.Split(pattern, "/")
	r := strings.Split(prefix, "/")
	k := len(r) - 1 // r[k] is the open segment

	reach := make([]bool, len(p)+1)
	next := make([]bool, len(p)+1)
	reach[0] = true
	closeStars(p, reach)
	for j := 0; j < k; j++ {
		clear(next)
		alive := false
		seg := r[j]
		// A whole segment of the prefix is never the resource's last.
		for i := 0; i < len(p); i++ {
			if !reach[i] {
				continue
			}
			switch p[i] {
			case "**":
				if wildOK(seg, j, j+2, true) {
					next[i] = true
					alive = true
				}
			case "*":
				if wildOK(seg, j, j+2, false) {
					next[i+1] = true
					alive = true
				}
			default:
				if p[i] == seg {
					next[i+1] = true
					alive = true
				}
			}
		}
		if !alive {
			return "", false
		}
		reach, next = next, reach
		closeStars(p, reach)
	}

	open := r[k]
	best, bestLen := "", -1
	for i := 0; i < len(p); i++ {
		if !reach[i] {
			continue
		}
		rest, restSegments := restOf(p[i+1:])
		var fill string
		switch p[i] {
		case "**":
			// The open segment is the last when nothing follows it.
			if !wildOK(open, k, k+1+restSegments, true) {
				fill = "x"
			}
		case "*":
			if !wildOK(open, k, k+2, false) {
				fill = "x"
			}
		default:
			if !strings.HasPrefix(p[i], open) {
				continue
			}
			fill = p[i][len(open):]
		}
		if n := len(prefix) + len(fill) + len(rest); n <= MaxResourceLen && (bestLen < 0 || n < bestLen) {
			best, bestLen = prefix+fill+rest, n
		}
	}
	return best, bestLen >= 0
}

// closeStars marks, after each reachable "**", the position it skips to:
// "**" may match no segment at all.
func closeStars(p []string, reach []bool) {
	for i := 0; i < len(p); i++ {
		if reach[i] && p[i] == "**" {
			reach[i+1] = true
		}
	}
}

// restOf writes out the shortest segments the pattern p matches after the
// open segment, each with its leading '/', and counts them.
func restOf(p []string) (string, int) {
	var b strings.Builder
	n := 0
	for _, s := range p {
		switch s {
		case "**":
		case "*":
			b.WriteString("/x")
			n++
		default:
			b.WriteString("/" + s)
			n++
		}
	}
	return b.String(), n
}
