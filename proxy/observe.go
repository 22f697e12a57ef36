package proxy

import (
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/gate"
)

// ObserveBanner is what a proxy in observe mode says when it starts, on
// standard error and in its log.
const ObserveBanner = "delegateos proxy: OBSERVE MODE — decisions are logged, not enforced"

// refuse handles a request the gate refused. It is answered with the
// denial; in observe mode it is logged as a refusal not enforced and left
// to be forwarded, holding no decision, so that nothing settles or charges
// it and it gets no second line. It reports whether to forward.
func (s *session) refuse(p *pending, d *gate.Decision) bool {
	spanDecided(p, d, !s.cfg.Observe)
	s.decided(p, d)
	if !s.cfg.Observe {
		s.deny(p, d)
		return false
	}
	p.decision = nil
	s.clientLog.observed(p.method, p.target, d)
	s.clientLog.writeTo(s.log)
	return true
}

// maxHiddenLogged bounds the entries an unfiltered list's line names, and
// maxHiddenName the bytes of each: an upstream's list may be long.
const (
	maxHiddenLogged = 100
	maxHiddenName   = 256
)

// wouldHide adds an entry the list's view hides to hidden, for the line
// logUnfiltered writes.
func wouldHide(hidden []string, name string) []string {
	if len(hidden) >= maxHiddenLogged {
		return hidden
	}
	if len(name) > maxHiddenName {
		n := maxHiddenName
		for n > 0 && !utf8.RuneStart(name[n]) {
			n--
		}
		name = name[:n] + "…"
	}
	return append(hidden, name)
}

// logUnfiltered logs, in observe mode, what filtering a list result would
// have removed: of upstream entries, how many the token's view shows and
// the first maxHiddenLogged it hides.
func (s *session) logUnfiltered(method string, upstream, shown int, hidden []string) {
	if shown == upstream {
		return
	}
	s.log.Info("list not filtered", zap.String("method", method), zap.Int("upstream", upstream),
		zap.Int("would_show", shown), zap.Strings("would_hide", hidden), zap.Bool("enforced", false))
}
