package reputation

import (
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Profile is one agent's reputation as this workspace observed it (§2).
type Profile struct {
	// Slug names the file, reputation/<slug>.md; the id is
	// "reputation:<slug>".
	Slug        string
	AgentDID    string
	AgentName   string
	LastUpdated time.Time
	// Dimensions and DomainCompetence hold the raw stored state; read
	// scores through Score, which applies decay.
	Dimensions       map[string]Dimension
	DomainCompetence map[string]Dimension
	// Signals is the append-only log, oldest first.
	Signals []Signal
}

// ID returns "reputation:<slug>".
func (p *Profile) ID() string { return ProfileIDPrefix + p.Slug }

// clone returns a copy of p that later changes to p do not reach: its
// own maps, and a signals slice with no room to append into p's.
func (p *Profile) clone() *Profile {
	c := *p
	c.Dimensions = maps.Clone(p.Dimensions)
	c.DomainCompetence = maps.Clone(p.DomainCompetence)
	c.Signals = p.Signals[:len(p.Signals):len(p.Signals)]
	return &c
}

// dimension returns the stored state for k.
func (p *Profile) dimension(k scoreKey) (Dimension, bool) {
	m := p.Dimensions
	if k.domain {
		m = p.DomainCompetence
	}
	d, ok := m[k.name]
	return d, ok
}

// apply folds one signal into the profile's state and log.
func (p *Profile) apply(s Signal) {
	k := s.key()
	m := &p.Dimensions
	if k.domain {
		m = &p.DomainCompetence
	}
	if *m == nil {
		*m = make(map[string]Dimension)
	}
	old := (*m)[k.name]
	(*m)[k.name] = Update(old, s.Score, s.Timestamp)
	if s.Timestamp.After(p.LastUpdated) {
		p.LastUpdated = s.Timestamp
	}
	p.Signals = append(p.Signals, s)
}

// View is a score as read at a given time.
type View struct {
	// Name is the dimension or domain.
	Name string `json:"name"`
	// Known is false when no signal backs the score: the agent is
	// unknown in this dimension, which is not the same as scoring 0 or
	// 0.5 (§1, §4.4). The other fields are zero then.
	Known bool `json:"known"`
	// Score is the raw score with decay applied up to the time asked for.
	Score float64 `json:"score"`
	// Raw is the stored score, before decay.
	Raw float64 `json:"rawScore"`
	// Confidence is Confidence(SampleSize).
	Confidence float64   `json:"confidence"`
	SampleSize int       `json:"sampleSize"`
	LastSignal time.Time `json:"lastSignal"`
	// Replayed is true when the time asked for is before the last signal,
	// so the score was recomputed from the signals up to then.
	Replayed bool `json:"replayed,omitempty"`
}

// Score returns a dimension's score as it reads at time at.
func (p *Profile) Score(dimension string, at time.Time) View {
	return p.view(scoreKey{name: dimension}, at)
}

// DomainScore returns the competence score for a domain as it reads at at.
func (p *Profile) DomainScore(domain string, at time.Time) View {
	return p.view(scoreKey{domain: true, name: domain}, at)
}

// view reads the stored state at at; for a time before the last signal it
// replays the signals up to at instead, so that --at shows the past.
func (p *Profile) view(k scoreKey, at time.Time) View {
	d, ok := p.dimension(k)
	replayed := false
	if ok && at.Before(d.LastSignal) {
		d, replayed = p.replay(k, at), true
	}
	if d.SampleSize <= 0 {
		return View{Name: k.name}
	}
	return View{
		Name: k.name, Known: true,
		Score: Decay(d.Score, d.LastSignal, at), Raw: d.Score,
		Confidence: Confidence(d.SampleSize), SampleSize: d.SampleSize, LastSignal: d.LastSignal,
		Replayed: replayed,
	}
}

// replay recomputes k's state from the signals observed up to at, in the
// order they were recorded.
func (p *Profile) replay(k scoreKey, at time.Time) Dimension {
	var d Dimension
	for _, s := range p.Signals {
		if s.key() == k && !s.Timestamp.After(at) {
			d = Update(d, s.Score, s.Timestamp)
		}
	}
	return d
}

// DimensionNames returns the standard dimensions, then the custom ones the
// profile has, sorted.
func (p *Profile) DimensionNames() []string {
	names := append([]string(nil), StandardDimensions...)
	var custom []string
	for name := range p.Dimensions {
		if !isStandard(name) {
			custom = append(custom, name)
		}
	}
	sort.Strings(custom)
	return append(names, custom...)
}

// DomainNames returns the profile's domains, sorted.
func (p *Profile) DomainNames() []string {
	names := make([]string, 0, len(p.DomainCompetence))
	for name := range p.DomainCompetence {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func isStandard(name string) bool {
	for _, s := range StandardDimensions {
		if s == name {
			return true
		}
	}
	return false
}

// decodeProfile reads a profile file's front matter (§2.2, §6.1). slug is
// the file's name without ".md"; the id must match it.
func (d *decoder) decodeProfile(doc *document, slug string) *Profile {
	p := &Profile{Slug: slug}
	root := doc.root
	f := fields(root)
	d.versions(f, root)
	if n := d.required(f, root, "", "type"); n != nil {
		if s, ok := d.str(n, "type", MaxIDLen, textLine); ok && s != TypeProfile {
			d.errorf(n, "type", "must be %q, not %q", TypeProfile, clip(s))
		}
	}
	if n := d.required(f, root, "", "id"); n != nil {
		if s, ok := d.str(n, "id", MaxIDLen, textLine); ok && s != p.ID() {
			d.errorf(n, "id", "must be %q: the id is \"reputation:\" and the file's slug (got %q)", p.ID(), clip(s))
		}
	}
	if n := d.required(f, root, "", "agentDid"); n != nil {
		p.AgentDID, _ = d.did(n, "agentDid")
	}
	if n := d.required(f, root, "", "agentName"); n != nil {
		p.AgentName, _ = d.str(n, "agentName", MaxTextLen, textLine)
	}
	if n := d.required(f, root, "", "lastUpdated"); n != nil {
		p.LastUpdated, _ = d.time(n, "lastUpdated")
	}
	if n := f["dimensions"]; n != nil && !isNull(n) {
		p.Dimensions = d.decodeDimensions(n, "dimensions")
	}
	if n := f["domainCompetence"]; n != nil && !isNull(n) {
		p.DomainCompetence = d.decodeDimensions(n, "domainCompetence")
	}
	if n := d.required(f, root, "", "signals"); n != nil {
		switch {
		case doc.block != nil:
			p.Signals = doc.signals
		case n.Kind != yaml.SequenceNode:
			d.errorf(n, "signals", "must be a list (it may be empty), not %s", kind(n))
		default:
			p.Signals = make([]Signal, 0, len(n.Content))
			for i, sn := range n.Content {
				if s, ok := d.decodeSignal(sn, fmt.Sprintf("signals[%d]", i)); ok {
					p.Signals = append(p.Signals, s)
				}
			}
		}
	}
	return p
}

// versions checks the awp and rdp fields.
func (d *decoder) versions(f map[string]*yaml.Node, root *yaml.Node) {
	if n := d.required(f, root, "", "awp"); n != nil {
		if s, ok := d.str(n, "awp", 32, textLine); ok && !isSemver(s) {
			d.errorf(n, "awp", "%q is not an AWP version such as %q", clip(s), AWPVersion)
		}
	}
	if n := d.required(f, root, "", "rdp"); n != nil {
		if s, ok := d.str(n, "rdp", 32, textLine); ok && s != RDPVersion {
			d.errorf(n, "rdp", "version %q is not supported: this is RDP %s", clip(s), RDPVersion)
		}
	}
}

// isSemver reports whether s is three dot-separated decimal numbers.
func isSemver(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 9 {
			return false
		}
		for i := 0; i < len(p); i++ {
			if p[i] < '0' || p[i] > '9' {
				return false
			}
		}
	}
	return true
}

// decodeDimensions reads a map of name → dimension (§2.4).
func (d *decoder) decodeDimensions(n *yaml.Node, field string) map[string]Dimension {
	if !d.mapping(n, field) {
		return nil
	}
	out := make(map[string]Dimension, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, v := n.Content[i], n.Content[i+1]
		f := field + "." + kn.Value
		name, ok := d.str(kn, f, MaxNameLen, textLine)
		if !ok {
			continue
		}
		if name == "" {
			d.errorf(kn, field, "a name is empty")
			continue
		}
		if !d.mapping(v, f) {
			continue
		}
		vf := fields(v)
		var dim Dimension
		good := true
		if x := d.required(vf, v, f+".", "score"); x != nil {
			dim.Score, ok = d.score(x, f+".score")
			good = good && ok
		} else {
			good = false
		}
		if x := vf["confidence"]; x != nil {
			dim.Confidence, ok = d.score(x, f+".confidence")
			good = good && ok
		}
		if x := d.required(vf, v, f+".", "sampleSize"); x != nil {
			dim.SampleSize, ok = d.count(x, f+".sampleSize")
			good = good && ok
		} else {
			good = false
		}
		if x := vf["lastSignal"]; x != nil {
			dim.LastSignal, ok = d.time(x, f+".lastSignal")
			good = good && ok
		} else if dim.SampleSize > 0 {
			d.errorf(v, f+".lastSignal", "is required when sampleSize is above 0")
			good = false
		}
		if good {
			out[name] = dim
		}
	}
	return out
}

// profileNode writes the profile's fields into a new document.
func newProfileDocument(p *Profile) *document {
	doc := newDocument(profileBody(p))
	doc.root.Content = mapNode(
		"awp", strNode(AWPVersion),
		"rdp", strNode(RDPVersion),
		"type", strNode(TypeProfile),
		"id", strNode(p.ID()),
		"agentDid", strNode(p.AgentDID),
		"agentName", strNode(p.AgentName),
		"lastUpdated", timeNode(p.LastUpdated),
		"dimensions", emptyMapNode(),
		"domainCompetence", emptyMapNode(),
		"signals", &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle},
	).Content
	return doc
}

func profileBody(p *Profile) string {
	return fmt.Sprintf("\n# %s — Reputation Profile\n\nReputation of %s as observed by this workspace, recorded by delegateos.\nSignals are append-only; scores decay toward 0.5 without new signals.\n", p.AgentName, p.AgentDID)
}

// setState writes the state of the dimensions the given signals touched,
// and lastUpdated, into the document. Unknown fields of each dimension
// stay; the signals themselves are appended by the caller.
func setState(doc *document, p *Profile, touched []Signal) {
	setKey(doc.root, "lastUpdated", timeNode(p.LastUpdated))
	for _, s := range touched {
		k := s.key()
		parent := "dimensions"
		if k.domain {
			parent = "domainCompetence"
		}
		dim, _ := p.dimension(k)
		m := childMap(childMap(doc.root, parent), k.name)
		setKey(m, "score", floatNode(dim.Score))
		setKey(m, "confidence", floatNode(dim.Confidence))
		setKey(m, "sampleSize", intNode(dim.SampleSize))
		setKey(m, "lastSignal", timeNode(dim.LastSignal))
	}
}
