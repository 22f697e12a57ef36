package reputation

import (
	"fmt"
	"math"
	"time"

	"gopkg.in/yaml.v3"
)

// Signal is one observation of an agent's behaviour (§3.1). Signals are
// append-only (§3.3): once recorded, nothing in this package changes or
// removes one.
type Signal struct {
	// Source is the DID of the observer.
	Source string `json:"source"`
	// Dimension is a standard or custom dimension, or DomainCompetence.
	Dimension string `json:"dimension"`
	// Domain names the domain of a DomainCompetence signal.
	Domain string `json:"domain,omitempty"`
	// Score is the observed performance, in [0, 1].
	Score float64 `json:"score"`
	// Timestamp is when the observation was made.
	Timestamp time.Time `json:"timestamp"`
	// Evidence references what was observed, e.g. "contract:q3-research".
	Evidence string `json:"evidence,omitempty"`
	// Message is a note for people.
	Message string `json:"message,omitempty"`
}

// key is the dimension or domain state the signal updates.
func (s Signal) key() scoreKey {
	if s.Dimension == DomainCompetence {
		return scoreKey{domain: true, name: s.Domain}
	}
	return scoreKey{name: s.Dimension}
}

// scoreKey names one dimension or one domain of a profile.
type scoreKey struct {
	domain bool
	name   string
}

// check validates a signal this package is asked to record. Names must be
// slugs here; reading is as lenient as §6 allows.
func (s Signal) check() error {
	var problems []string
	if !ValidDID(s.Source) {
		problems = append(problems, fmt.Sprintf("source %q is not a DID", clip(s.Source)))
	}
	switch {
	case !validName(s.Dimension):
		problems = append(problems, fmt.Sprintf("dimension %q must be a lowercase name of letters, digits and hyphens (at most %d bytes)", clip(s.Dimension), MaxNameLen))
	case s.Dimension == DomainCompetence && !validName(s.Domain):
		problems = append(problems, fmt.Sprintf("a domain-competence signal needs a domain: a lowercase name of letters, digits and hyphens (got %q)", clip(s.Domain)))
	case s.Dimension != DomainCompetence && s.Domain != "":
		problems = append(problems, fmt.Sprintf("a domain is given only with dimension %q", DomainCompetence))
	}
	if math.IsNaN(s.Score) || !validScore(s.Score) {
		problems = append(problems, fmt.Sprintf("score %v is outside [0, 1]", s.Score))
	}
	if s.Timestamp.IsZero() {
		problems = append(problems, "the timestamp is missing")
	}
	if err := checkText(s.Evidence, MaxIDLen, textLine); err != nil {
		problems = append(problems, fmt.Sprintf("evidence: %v", err))
	}
	if err := checkText(s.Message, MaxTextLen, textBlock); err != nil {
		problems = append(problems, fmt.Sprintf("message: %v", err))
	}
	if len(problems) == 0 {
		return nil
	}
	ps := make([]Problem, len(problems))
	for i, m := range problems {
		ps[i] = Problem{File: "signal", Message: m, Severity: SeverityError}
	}
	return &ValidationError{Problems: ps}
}

// node encodes the signal in the field order of §3.1.
func (s Signal) node() *yaml.Node {
	m := mapNode("source", strNode(s.Source), "dimension", strNode(s.Dimension))
	if s.Domain != "" {
		m.Content = append(m.Content, keyNode("domain"), strNode(s.Domain))
	}
	m.Content = append(m.Content, keyNode("score"), floatNode(s.Score), keyNode("timestamp"), timeNode(s.Timestamp))
	if s.Evidence != "" {
		m.Content = append(m.Content, keyNode("evidence"), strNode(s.Evidence))
	}
	if s.Message != "" {
		m.Content = append(m.Content, keyNode("message"), strNode(s.Message))
	}
	return m
}

// decodeSignal reads one signal (§3.1, §6.1). Unknown fields are allowed
// and stay in the file.
func (d *decoder) decodeSignal(n *yaml.Node, field string) (Signal, bool) {
	if !d.mapping(n, field) {
		return Signal{}, false
	}
	var s Signal
	ok := true
	seen := 0
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		f := field + "." + k
		var good bool
		switch k {
		case "source":
			s.Source, good = d.did(v, f)
			seen |= 1
		case "dimension":
			s.Dimension, good = d.str(v, f, MaxNameLen, textLine)
			if good && s.Dimension == "" {
				d.errorf(v, f, "is empty")
				good = false
			}
			seen |= 2
		case "score":
			s.Score, good = d.score(v, f)
			seen |= 4
		case "timestamp":
			s.Timestamp, good = d.time(v, f)
			seen |= 8
		case "domain":
			s.Domain, good = d.str(v, f, MaxNameLen, textLine)
		case "evidence":
			s.Evidence, good = d.str(v, f, MaxIDLen, textLine)
		case "message":
			s.Message, good = d.str(v, f, MaxTextLen, textBlock)
		default:
			good = true
		}
		ok = ok && good
	}
	for bit, name := range []string{"source", "dimension", "score", "timestamp"} {
		if seen&(1<<bit) == 0 {
			d.errorf(n, field+"."+name, "is required")
			ok = false
		}
	}
	if ok && s.Dimension == DomainCompetence && s.Domain == "" {
		d.errorf(n, field+".domain", "is required when the dimension is %q", DomainCompetence)
		ok = false
	}
	return s, ok
}
