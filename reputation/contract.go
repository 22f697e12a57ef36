package reputation

import (
	"fmt"
	"math"
	"sort"
	"time"

	"gopkg.in/yaml.v3"
)

// Status is a contract's place in its lifecycle (§5.7).
type Status string

// The lifecycle: draft → active → completed → evaluated, one step at a
// time, never back.
const (
	Draft     Status = "draft"
	Active    Status = "active"
	Completed Status = "completed"
	Evaluated Status = "evaluated"
)

// next is the one status each status may move to.
var next = map[Status]Status{Draft: Active, Active: Completed, Completed: Evaluated}

// Valid reports whether s is one of the four statuses.
func (s Status) Valid() bool { return s == Draft || s == Active || s == Completed || s == Evaluated }

// Contract is an RDP delegation contract (§5).
type Contract struct {
	// Slug names the file, contracts/<slug>.md; the id is
	// "contract:<slug>".
	Slug   string
	Status Status
	// Delegator and Delegate are DIDs; DelegateSlug names the delegate's
	// profile.
	Delegator, Delegate, DelegateSlug string
	Created                           time.Time
	// Deadline is zero when the contract has none.
	Deadline    time.Time
	Task        Task
	Scope       *Scope
	Constraints *Constraints
	// Criteria maps criterion names to weights, which should sum to 1.0.
	Criteria map[string]float64
	// Result maps criterion names to scores; nil until evaluated.
	Result map[string]float64
	// Link is set when the contract tracks a DelegateOS delegation.
	Link *Link
}

// Task is what the delegate is asked to do (§5.3).
type Task struct {
	Description  string
	OutputFormat string // e.g. KnowledgeArtifact
	OutputSlug   string // the expected artifact's slug
	// Domain is the domain rated when the output is a knowledge artifact
	// that does not exist or has no tags (an extension field, task.domain).
	Domain string
}

// Scope is what is and is not in scope (§5.4).
type Scope struct {
	Include []string
	Exclude []string
}

// Constraints are the behavioural constraints of §5.5; other constraint
// fields in a file are kept but not interpreted.
type Constraints struct {
	RequireCitations    *bool
	ConfidenceThreshold *float64
}

// Link ties a contract to a DelegateOS delegation. It is stored under the
// extension field "delegateos", which other tools keep as an unknown field.
type Link struct {
	// DelegationID is the DelegateOS delegation (del_…) the contract
	// tracks; the contract's slug is LinkSlug(DelegationID).
	DelegationID string
	// TaskContractID is the DelegateOS task contract (ct_…), if known.
	TaskContractID string
	// Measured holds criterion scores RecordOutcome measured while the
	// contract waits for a person to score the rest; Evaluate uses them
	// for the criteria it is not given.
	Measured map[string]float64
}

// ID returns "contract:<slug>".
func (c *Contract) ID() string { return ContractIDPrefix + c.Slug }

// CriteriaNames returns the criteria in a stable order: the standard four
// in the spec's order, then the others sorted.
func (c *Contract) CriteriaNames() []string {
	var names, custom []string
	for _, std := range []string{Completeness, Accuracy, Clarity, Timeliness} {
		if _, ok := c.Criteria[std]; ok {
			names = append(names, std)
		}
	}
	for name := range c.Criteria {
		switch name {
		case Completeness, Accuracy, Clarity, Timeliness:
		default:
			custom = append(custom, name)
		}
	}
	sort.Strings(custom)
	return append(names, custom...)
}

// weightTolerance is how far from 1.0 the criteria weights may sum.
const weightTolerance = 1e-6

// checkWeights reports criteria weights that do not sum to 1.0 (§6.2
// SHOULD). Evaluate refuses such a contract; loading only warns.
func checkWeights(criteria map[string]float64) error {
	if len(criteria) == 0 {
		return fmt.Errorf("%w: the contract has no evaluation criteria", ErrEvaluation)
	}
	sum := 0.0
	for _, w := range criteria {
		sum += w
	}
	if math.Abs(sum-1) > weightTolerance {
		return fmt.Errorf("%w: the criteria weights sum to %s, not 1.0", ErrEvaluation, fmtNum(sum))
	}
	return nil
}

// WeightedScore returns Σ weight·score over the criteria (§5.8), rounded to
// 4 decimals: the score of the reliability signal an evaluation generates.
// Every criterion must have a score in [0, 1], no score may name another
// criterion, and the weights must sum to 1.0.
func WeightedScore(criteria, scores map[string]float64) (float64, error) {
	if err := checkWeights(criteria); err != nil {
		return 0, err
	}
	var missing []string
	sum, weights := 0.0, 0.0
	for name, w := range criteria {
		s, ok := scores[name]
		if !ok {
			missing = append(missing, name)
			continue
		}
		if math.IsNaN(s) || !validScore(s) {
			return 0, fmt.Errorf("%w: the score for %q is %v, outside [0, 1]", ErrEvaluation, name, s)
		}
		sum += w * s
		weights += w
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return 0, fmt.Errorf("%w: no score for %v (every criterion must be scored)", ErrEvaluation, missing)
	}
	for name := range scores {
		if _, ok := criteria[name]; !ok {
			return 0, fmt.Errorf("%w: %q is not one of the contract's criteria", ErrEvaluation, clip(name))
		}
	}
	// Dividing by the weights' sum (within weightTolerance of 1) keeps
	// the result in [0, 1] despite floating-point error.
	return round(math.Min(1, math.Max(0, sum/weights)), 4), nil
}

// fmtNum prints a number briefly.
func fmtNum(x float64) string { return fmt.Sprintf("%.6g", x) }

// decodeContract reads a contract file's front matter (§5.2, §6.2).
func (d *decoder) decodeContract(doc *document, slug string) *Contract {
	c := &Contract{Slug: slug}
	root := doc.root
	f := fields(root)
	d.versions(f, root)
	if n := d.required(f, root, "", "type"); n != nil {
		if s, ok := d.str(n, "type", MaxIDLen, textLine); ok && s != TypeContract {
			d.errorf(n, "type", "must be %q, not %q", TypeContract, clip(s))
		}
	}
	if n := d.required(f, root, "", "id"); n != nil {
		if s, ok := d.str(n, "id", MaxIDLen, textLine); ok && s != c.ID() {
			d.errorf(n, "id", "must be %q: the id is \"contract:\" and the file's slug (got %q)", c.ID(), clip(s))
		}
	}
	if n := d.required(f, root, "", "status"); n != nil {
		if s, ok := d.str(n, "status", 32, textLine); ok {
			c.Status = Status(s)
			if !c.Status.Valid() {
				d.errorf(n, "status", "%q is not one of draft, active, completed, evaluated", clip(s))
			}
		}
	}
	if n := d.required(f, root, "", "delegator"); n != nil {
		c.Delegator, _ = d.did(n, "delegator")
	}
	if n := d.required(f, root, "", "delegate"); n != nil {
		c.Delegate, _ = d.did(n, "delegate")
	}
	if n := d.required(f, root, "", "delegateSlug"); n != nil {
		if s, ok := d.str(n, "delegateSlug", MaxSlugLen, textLine); ok {
			if ValidSlug(s) {
				c.DelegateSlug = s
			} else {
				d.errorf(n, "delegateSlug", "%q is not a slug (lowercase letters, digits and hyphens)", clip(s))
			}
		}
	}
	if n := d.required(f, root, "", "created"); n != nil {
		c.Created, _ = d.time(n, "created")
	}
	if n := f["deadline"]; n != nil && !isNull(n) {
		c.Deadline, _ = d.time(n, "deadline")
	}
	if n := d.required(f, root, "", "task"); n != nil {
		c.Task = d.decodeTask(n)
	}
	if n := f["scope"]; n != nil && !isNull(n) {
		c.Scope = d.decodeScope(n)
	}
	if n := f["constraints"]; n != nil && !isNull(n) {
		c.Constraints = d.decodeConstraints(n)
	}
	if n := d.required(f, root, "", "evaluation"); n != nil {
		d.decodeEvaluation(n, c)
	}
	if n := f[linkField]; n != nil && !isNull(n) {
		c.Link = d.decodeLink(n, slug)
	}
	return c
}

func (d *decoder) decodeTask(n *yaml.Node) Task {
	var t Task
	if !d.mapping(n, "task") {
		return t
	}
	f := fields(n)
	if x := d.required(f, n, "task.", "description"); x != nil {
		t.Description, _ = d.str(x, "task.description", MaxTextLen, textBlock)
	}
	if x := f["outputFormat"]; x != nil && !isNull(x) {
		t.OutputFormat, _ = d.str(x, "task.outputFormat", MaxNameLen, textLine)
	}
	if x := f["outputSlug"]; x != nil && !isNull(x) {
		if s, ok := d.str(x, "task.outputSlug", MaxSlugLen, textLine); ok {
			if ValidSlug(s) {
				t.OutputSlug = s
			} else {
				d.errorf(x, "task.outputSlug", "%q is not a slug (lowercase letters, digits and hyphens)", clip(s))
			}
		}
	}
	if x := f["domain"]; x != nil && !isNull(x) {
		if s, ok := d.str(x, "task.domain", MaxNameLen, textLine); ok {
			if validName(s) {
				t.Domain = s
			} else {
				d.errorf(x, "task.domain", "%q is not a domain name (lowercase letters, digits and hyphens)", clip(s))
			}
		}
	}
	return t
}

func (d *decoder) decodeScope(n *yaml.Node) *Scope {
	if !d.mapping(n, "scope") {
		return nil
	}
	s := &Scope{}
	f := fields(n)
	s.Include = d.strList(f["include"], "scope.include")
	s.Exclude = d.strList(f["exclude"], "scope.exclude")
	return s
}

func (d *decoder) strList(n *yaml.Node, field string) []string {
	if n == nil || isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, field, "must be a list of strings, not %s", kind(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, x := range n.Content {
		if s, ok := d.str(x, fmt.Sprintf("%s[%d]", field, i), MaxTextLen, textBlock); ok {
			out = append(out, s)
		}
	}
	return out
}

func (d *decoder) decodeConstraints(n *yaml.Node) *Constraints {
	if !d.mapping(n, "constraints") {
		return nil
	}
	c := &Constraints{}
	f := fields(n)
	if x := f["requireCitations"]; x != nil && !isNull(x) {
		if b, ok := d.boolean(x, "constraints.requireCitations"); ok {
			c.RequireCitations = &b
		}
	}
	if x := f["confidenceThreshold"]; x != nil && !isNull(x) {
		if v, ok := d.score(x, "constraints.confidenceThreshold"); ok {
			c.ConfidenceThreshold = &v
		}
	}
	return c
}

// decodeEvaluation reads criteria and result and applies §6.2: result is
// null until the contract is evaluated, and then scores every criterion.
func (d *decoder) decodeEvaluation(n *yaml.Node, c *Contract) {
	if !d.mapping(n, "evaluation") {
		return
	}
	f := fields(n)
	if x := d.required(f, n, "evaluation.", "criteria"); x != nil {
		c.Criteria = d.scoreMap(x, "evaluation.criteria")
		if len(c.Criteria) > MaxCriteria {
			d.errorf(x, "evaluation.criteria", "more than %d criteria", MaxCriteria)
		}
		if c.Criteria != nil {
			if err := checkWeights(c.Criteria); err != nil {
				d.warnf(x, "evaluation.criteria", "weights should sum to 1.0 (§6.2): %v; the contract cannot be evaluated until they do", trimSentinel(err))
			}
		}
	}
	res := f["result"]
	if res != nil && !isNull(res) {
		c.Result = d.scoreMap(res, "evaluation.result")
	}
	switch {
	case c.Status != Evaluated && c.Status.Valid() && res != nil && !isNull(res):
		d.errorf(res, "evaluation.result", "must be null until the contract is evaluated (status is %s)", c.Status)
	case c.Status == Evaluated && (res == nil || isNull(res)):
		d.errorf(n, "evaluation.result", "must score every criterion once the contract is evaluated")
	case c.Status == Evaluated && c.Result != nil:
		for _, name := range c.CriteriaNames() {
			if _, ok := c.Result[name]; !ok {
				d.errorf(res, "evaluation.result."+name, "criterion %q has no score, but the contract is evaluated", name)
			}
		}
		for name := range c.Result {
			if _, ok := c.Criteria[name]; !ok {
				d.warnf(res, "evaluation.result."+name, "%q is not one of the criteria", name)
			}
		}
	}
}

// scoreMap reads a mapping of names to numbers in [0, 1].
func (d *decoder) scoreMap(n *yaml.Node, field string) map[string]float64 {
	if !d.mapping(n, field) {
		return nil
	}
	out := make(map[string]float64, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, v := n.Content[i], n.Content[i+1]
		name, ok := d.str(kn, field, MaxNameLen, textLine)
		if !ok {
			continue
		}
		if name == "" {
			d.errorf(kn, field, "a name is empty")
			continue
		}
		if x, ok := d.score(v, field+"."+name); ok {
			out[name] = x
		}
	}
	return out
}

// linkField is the extension field that holds a Link.
const linkField = "delegateos"

func (d *decoder) decodeLink(n *yaml.Node, slug string) *Link {
	if !d.mapping(n, linkField) {
		return nil
	}
	l := &Link{}
	f := fields(n)
	if x := d.required(f, n, linkField+".", "delegationId"); x != nil {
		if s, ok := d.str(x, linkField+".delegationId", MaxIDLen, textLine); ok {
			l.DelegationID = s
			if want, err := LinkSlug(s); err != nil || want != slug {
				d.errorf(x, linkField+".delegationId", "a contract linked to delegation %q must be named %q", clip(s), want)
			}
		}
	}
	if x := f["taskContractId"]; x != nil && !isNull(x) {
		l.TaskContractID, _ = d.str(x, linkField+".taskContractId", MaxIDLen, textLine)
	}
	if x := f["measured"]; x != nil && !isNull(x) {
		l.Measured = d.scoreMap(x, linkField+".measured")
	}
	return l
}

// trimSentinel drops the sentinel's text from a wrapped error's message.
func trimSentinel(err error) string {
	s := err.Error()
	for _, prefix := range []string{ErrEvaluation.Error() + ": ", ErrInvalid.Error() + ": "} {
		if len(s) > len(prefix) && s[:len(prefix)] == prefix {
			return s[len(prefix):]
		}
	}
	return s
}

// newContractDocument writes a new contract's fields in the order of §5.2.
func newContractDocument(c *Contract, body string) *document {
	doc := newDocument(body)
	m := mapNode(
		"awp", strNode(AWPVersion),
		"rdp", strNode(RDPVersion),
		"type", strNode(TypeContract),
		"id", strNode(c.ID()),
		"status", strNode(string(c.Status)),
		"delegator", strNode(c.Delegator),
		"delegate", strNode(c.Delegate),
		"delegateSlug", strNode(c.DelegateSlug),
		"created", timeNode(c.Created),
	)
	if !c.Deadline.IsZero() {
		m.Content = append(m.Content, keyNode("deadline"), timeNode(c.Deadline))
	}
	task := mapNode("description", strNode(c.Task.Description))
	if c.Task.OutputFormat != "" {
		task.Content = append(task.Content, keyNode("outputFormat"), strNode(c.Task.OutputFormat))
	}
	if c.Task.OutputSlug != "" {
		task.Content = append(task.Content, keyNode("outputSlug"), strNode(c.Task.OutputSlug))
	}
	if c.Task.Domain != "" {
		task.Content = append(task.Content, keyNode("domain"), strNode(c.Task.Domain))
	}
	m.Content = append(m.Content, keyNode("task"), task)
	if c.Scope != nil {
		s := mapNode()
		if c.Scope.Include != nil {
			s.Content = append(s.Content, keyNode("include"), strSeqNode(c.Scope.Include))
		}
		if c.Scope.Exclude != nil {
			s.Content = append(s.Content, keyNode("exclude"), strSeqNode(c.Scope.Exclude))
		}
		m.Content = append(m.Content, keyNode("scope"), s)
	}
	if c.Constraints != nil {
		s := mapNode()
		if c.Constraints.RequireCitations != nil {
			s.Content = append(s.Content, keyNode("requireCitations"), boolNode(*c.Constraints.RequireCitations))
		}
		if c.Constraints.ConfidenceThreshold != nil {
			s.Content = append(s.Content, keyNode("confidenceThreshold"), floatNode(*c.Constraints.ConfidenceThreshold))
		}
		m.Content = append(m.Content, keyNode("constraints"), s)
	}
	crit := mapNode()
	for _, name := range c.CriteriaNames() {
		crit.Content = append(crit.Content, keyNode(name), floatNode(c.Criteria[name]))
	}
	m.Content = append(m.Content, keyNode("evaluation"), mapNode("criteria", crit, "result", nullNode()))
	doc.root.Content = m.Content
	if c.Link != nil {
		setLink(doc, c.Link)
	}
	return doc
}

// setLink writes the link extension field; unknown fields inside stay.
func setLink(doc *document, l *Link) {
	m := childMap(doc.root, linkField)
	setKey(m, "delegationId", strNode(l.DelegationID))
	if l.TaskContractID != "" {
		setKey(m, "taskContractId", strNode(l.TaskContractID))
	}
	if len(l.Measured) > 0 {
		mm := mapNode()
		for _, name := range sortedKeys(l.Measured) {
			mm.Content = append(mm.Content, keyNode(name), floatNode(l.Measured[name]))
		}
		setKey(m, "measured", mm)
	}
}

// setStatus writes status (and, when evaluated, the result) in place.
func setStatus(doc *document, c *Contract) {
	setKey(doc.root, "status", strNode(string(c.Status)))
	if c.Status == Evaluated {
		res := mapNode()
		for _, name := range c.CriteriaNames() {
			res.Content = append(res.Content, keyNode(name), floatNode(c.Result[name]))
		}
		setKey(childMap(doc.root, "evaluation"), "result", res)
	}
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// contractBody is the Markdown of a new contract file.
func contractBody(c *Contract) string {
	return fmt.Sprintf("\n# %s — Delegation Contract\n\n%s\n\nDelegated by %s to %s.\n", c.Slug, c.Task.Description, c.Delegator, c.Delegate)
}
