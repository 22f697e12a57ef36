package reputation

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// ArtifactsDir holds AWP knowledge artifacts, whose tags name the domains
// an evaluation rates (§5.8).
const ArtifactsDir = "artifacts"

// Evaluate scores a completed contract and records the signals it
// generates in the delegate's profile (§5.7, §5.8): a reliability signal
// whose score is the criteria's weighted average, and, when the task's
// output is a knowledge artifact, a domain-competence signal of the same
// score for each domain of the artifact (its tags, or task.domain when the
// artifact has none). The signals reference the contract as evidence.
//
// scores must cover every criterion; a criterion it leaves out is taken
// from the scores RecordOutcome measured, if any. source is the evaluator's
// DID or principal ID ("" means the delegator). The profile is written
// before the contract: if the process dies in between, the contract is
// still completed, and evaluating it again does not record its signals
// twice.
//
// An agent never rates its own work: when the delegate is also the
// delegator or the source (compared as SameAgent does), nothing is
// recorded and the error is a *SelfDealingError.
func (w *Workspace) Evaluate(slug string, scores map[string]float64, source string, now time.Time) (*Contract, []Signal, error) {
	unlock, err := w.lock(ContractsDir)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	lc, err := w.readContract(contractSlug(slug))
	if err != nil {
		return nil, nil, err
	}
	return w.evaluateLocked(lc, scores, source, now)
}

// evaluateLocked implements Evaluate; the caller holds the contracts lock.
func (w *Workspace) evaluateLocked(lc *loadedContract, scores map[string]float64, source string, now time.Time) (*Contract, []Signal, error) {
	c := lc.c
	if c.Status != Completed {
		return nil, nil, &TransitionError{Contract: c.ID(), From: c.Status, To: Evaluated}
	}
	merged := make(map[string]float64, len(c.Criteria))
	if c.Link != nil {
		for name, s := range c.Link.Measured {
			if _, ok := c.Criteria[name]; ok {
				merged[name] = s
			}
		}
	}
	for name, s := range scores {
		merged[name] = s
	}
	weighted, err := WeightedScore(c.Criteria, merged)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.ID(), err)
	}
	if source == "" {
		source = c.Delegator
	}
	src, err := sourceDID(source)
	if err != nil {
		return nil, nil, err
	}
	if err := selfDealing(c, src); err != nil {
		return nil, nil, err
	}
	domains, err := w.evaluationDomains(c)
	if err != nil {
		return nil, nil, err
	}
	at := truncate(now)
	msg := "Contract evaluation: " + firstLine(c.Task.Description)
	signals := []Signal{{Source: src, Dimension: Reliability, Score: weighted, Timestamp: at, Evidence: c.ID(), Message: msg}}
	for _, dom := range domains {
		signals = append(signals, Signal{Source: src, Dimension: DomainCompetence, Domain: dom, Score: weighted, Timestamp: at, Evidence: c.ID(), Message: msg})
	}
	for _, s := range signals {
		if err := s.check(); err != nil {
			return nil, nil, err
		}
	}

	if err := step(c, Evaluated); err != nil {
		return nil, nil, err
	}
	c.Result = merged
	unlock, err := w.lock(ProfilesDir)
	if err != nil {
		return nil, nil, err
	}
	name := c.Delegate
	if !strings.HasPrefix(c.DelegateSlug, "key-") {
		name = c.DelegateSlug
	}
	ref := agentRef{did: c.Delegate, slug: c.DelegateSlug, ed: true}
	_, err = w.appendLocked(ref, name, signals, alreadyRecorded)
	unlock()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: recording the evaluation's signals: %w", c.ID(), err)
	}
	setStatus(lc.doc, c)
	data, err := lc.doc.encode()
	if err != nil {
		return nil, nil, err
	}
	if err := writeFile(w.path(ContractsDir, c.Slug), data); err != nil {
		return nil, nil, err
	}
	return c, signals, nil
}

// alreadyRecorded reports whether the profile holds a signal with the same
// evidence, source, dimension, domain and score: one an interrupted
// evaluation of the same contract recorded.
func alreadyRecorded(p *Profile, s Signal) bool {
	for _, old := range p.Signals {
		if old.Evidence == s.Evidence && old.Source == s.Source && old.Dimension == s.Dimension &&
			old.Domain == s.Domain && old.Score == s.Score {
			return true
		}
	}
	return false
}

// evaluationDomains returns the domains an evaluation of c rates: none
// unless the output is a knowledge artifact; then the artifact's tags
// (slugified, at most MaxDomainSignals), or task.domain when the artifact
// is missing or has no tags.
func (w *Workspace) evaluationDomains(c *Contract) ([]string, error) {
	if c.Task.OutputFormat != KnowledgeArtifact {
		return nil, nil
	}
	var domains []string
	if c.Task.OutputSlug != "" {
		tags, err := w.artifactTags(c.Task.OutputSlug)
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, t := range tags {
			if d := Slugify(t); d != "" && !seen[d] && len(domains) < MaxDomainSignals {
				seen[d] = true
				domains = append(domains, d)
			}
		}
	}
	if len(domains) == 0 && c.Task.Domain != "" {
		domains = []string{c.Task.Domain}
	}
	return domains, nil
}

// artifactTags reads the tags of artifacts/<slug>.md; a missing artifact
// has none. An artifact that cannot be read is an error: the evaluation
// would otherwise silently skip its domains.
func (w *Workspace) artifactTags(slug string) ([]string, error) {
	path := filepath.Join(w.dir, ArtifactsDir, slug+".md")
	data, err := readFile(path)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	doc, err := parseDocument(data)
	if err != nil {
		return nil, fmt.Errorf("%w: artifact %s/%s.md: %v", ErrInvalid, ArtifactsDir, slug, err)
	}
	d := &decoder{file: ArtifactsDir + "/" + slug + ".md"}
	n := lookup(doc.root, "tags")
	if n == nil || isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, "tags", "must be a list of strings, not %s", kind(n))
		return nil, d.err()
	}
	tags := d.strList(n, "tags")
	if err := d.err(); err != nil {
		return nil, err
	}
	return tags, nil
}

// firstLine shortens a description for a signal's message.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	const max = 200
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strings.TrimSpace(s)
}
