package verify

import (
	"slices"
	"sync"
	"unicode"
)

// legacyFoldRisk lists, sorted, the BMP characters that JavaScript's
// case-insensitive matching without the u flag may treat differently from
// Go's (?i). JavaScript then compares toUpperCase of each character, keeping
// a character whose upper case is several characters or is ASCII while it is
// not; Go compares Unicode simple case folding orbits. The two agree on an
// orbit of exactly one upper- and one lower-case letter that map to each
// other, outside ASCII and outside Greek Extended (whose ypogegrammeni
// letters have multi-character upper cases). Every other non-ASCII letter
// with a case partner is listed: ſ and K (which fold to s and k), µ, ß and
// ẞ, ϴ, Ω, Å, the Greek Extended block and so on.
var legacyFoldRisk = sync.OnceValue(func() []rune {
	var risky []rune
	for r := rune(0x80); r <= 0xFFFF; r++ {
		if unicode.SimpleFold(r) == r {
			continue // no case partner
		}
		if !simplePair(r) {
			risky = append(risky, r)
		}
	}
	return risky
})

// simplePair reports whether r's fold orbit is {upper, lower} with each
// the simple case mapping of the other, both non-ASCII, outside U+1F80–U+1FFF.
func simplePair(r rune) bool {
	o := unicode.SimpleFold(r)
	if unicode.SimpleFold(o) != r {
		return false // orbit of three or more
	}
	for _, c := range []rune{r, o} {
		if c < 0x80 || (0x1F80 <= c && c <= 0x1FFF) {
			return false
		}
	}
	up, low := r, o
	if unicode.IsLower(r) {
		up, low = o, r
	}
	return unicode.IsUpper(up) && unicode.IsLower(low) &&
		unicode.ToUpper(low) == up && unicode.ToLower(up) == low
}

// foldsDifferently reports whether c is in legacyFoldRisk.
func foldsDifferently(c rune) bool {
	_, found := slices.BinarySearch(legacyFoldRisk(), c)
	return found
}

// foldsDifferentlyIn returns a character of legacyFoldRisk in [lo, hi].
func foldsDifferentlyIn(lo, hi rune) (rune, bool) {
	risky := legacyFoldRisk()
	i, _ := slices.BinarySearch(risky, lo)
	if i < len(risky) && risky[i] <= hi {
		return risky[i], true
	}
	return 0, false
}
