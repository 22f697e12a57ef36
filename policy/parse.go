package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/redisconn"
)

// Parse parses a policy file's contents. Relative paths in it are resolved
// against dir. Every problem found is reported in the returned Errors.
func Parse(data []byte, dir string) (*Policy, error) {
	p, _, err := parse(data, dir)
	return p, err
}

// parse is Parse; it also returns the line of each top-level key given a
// value other than null.
func parse(data []byte, dir string) (*Policy, map[string]int, error) {
	root, err := decodeDocument(data)
	if err != nil {
		return nil, nil, Errors{err}
	}
	p := Default()
	ps := &parser{dir: dir, lines: map[string]int{}, rel: map[string]string{}}
	if root == nil || isNull(root) {
		return p, ps.lines, nil
	}
	ps.policy(root, p)
	ps.checkMaxCosts(p.DefaultCost)
	if len(ps.rel) > 0 {
		p.relative = ps.rel
	}
	if p.StateDir != "" {
		p.UseStateDir(p.StateDir)
	}
	if len(ps.errs) > 0 {
		slices.SortStableFunc(ps.errs, func(a, b *Error) int { return a.Line - b.Line })
		return nil, nil, ps.errs
	}
	return p, ps.lines, nil
}

// decodeDocument reads the one YAML document in data; nil if there is none.
func decodeDocument(data []byte) (root *yaml.Node, perr *Error) {
	// yaml.v3 is not known to panic on any input, but a panic here would
	// take the proxy down at start-up with a stack trace instead of a line.
	defer func() {
		if r := recover(); r != nil {
			root, perr = nil, &Error{Msg: fmt.Sprintf("not valid YAML (%v)", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(data, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, syntaxError(data, err)
		}
		return nil, &Error{Line: extra.Line, Msg: "a policy file holds one YAML document; remove the second"}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns yaml.v3's "yaml: line N: msg" into an Error at line N,
// and the column syntaxColumn finds there.
func syntaxError(data []byte, err error) *Error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{Line: line, Column: syntaxColumn(data, line, m[2]), Msg: "not valid YAML: " + m[2]}
	}
	return &Error{Msg: "not valid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// syntaxColumn is the 1-based column (in characters) on line of data where
// the YAML problem msg is, or 0. yaml.v3 names only the line: the column
// is found from what the message says is wrong, else it is where the
// line's content starts.
func syntaxColumn(data []byte, line int, msg string) int {
	lines := strings.Split(string(data), "\n")
	if line < 1 || line > len(lines) {
		return 0
	}
	text := strings.TrimRight(lines[line-1], "\r")
	at := -1 // byte offset in text
	switch {
	case strings.Contains(msg, "cannot start any token"):
		// A tab in the indentation, or a reserved character (@, `).
		at = strings.IndexAny(text, "\t@`")
	case strings.Contains(msg, "did not find expected") && strings.ContainsAny(text, "[{"):
		// A flow collection that is not closed: where it opens.
		at = lastUnclosed(text)
	case strings.Contains(msg, "mapping values are not allowed"):
		// The colon that would start a mapping where none may be.
		for i := len(text) - 1; i >= 0; i-- {
			if text[i] == ':' && (i == len(text)-1 || text[i+1] == ' ' || text[i+1] == '\t') {
				at = i
				break
			}
		}
	}
	if at < 0 {
		at = len(text) - len(strings.TrimLeft(text, " \t"))
		if at == len(text) {
			return 0
		}
	}
	return utf8.RuneCountInString(text[:at]) + 1
}

// lastUnclosed is the offset of the last [ or { on text that no ] or }
// after it closes (quotes ignored), or -1.
func lastUnclosed(text string) int {
	var open []int
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '[', '{':
			open = append(open, i)
		case ']', '}':
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
		}
	}
	if len(open) == 0 {
		return -1
	}
	return open[len(open)-1]
}

// parser walks the YAML node tree so that every problem keeps its line.
type parser struct {
	dir  string
	errs Errors
	// lines holds the line of each top-level key, for warnings.
	lines map[string]int
	// maxCosts are the max_cost values to compare with their rules' cost
	// once default_cost, which may come later in the file, is known.
	maxCosts []maxCostCheck
	// rel holds the paths written relative, by key, as written.
	rel map[string]string
}

type maxCostCheck struct {
	node    *yaml.Node
	key     string
	cost    *int64
	maxCost int64
}

func (ps *parser) errorf(n *yaml.Node, key, format string, args ...any) {
	if len(ps.errs) < maxProblems {
		ps.errs = append(ps.errs, &Error{Line: n.Line, Key: key, Msg: fmt.Sprintf(format, args...)})
	}
}

var topKeys = []string{"roots", "tools", "resources", "prompts", "default_cost", "allow_unauthenticated", "honour_upstream_cost",
	"revocation_list", "spend_store", "max_frame_bytes", "log", "workspace", "judge", "reputation", "upstream_user", "rate",
	"tool_pins", "proxy_key", "audit_log", "receipts", "ended_delegations", "require_signature", "methods", "state_dir", "ldp"}

func (ps *parser) policy(n *yaml.Node, p *Policy) {
	if n.Kind != yaml.MappingNode {
		ps.errorf(n, "", "the policy must be a mapping of keys (%s)", strings.Join(topKeys, ", "))
		return
	}
	ps.mapping(n, "", topKeys, func(key string, v *yaml.Node) {
		ps.lines[key] = v.Line
		switch key {
		case "roots":
			p.Roots = ps.roots(v, key)
		case "tools":
			p.Tools = ps.rules(v, key, toolRules)
		case "resources":
			p.Resources = ps.rules(v, key, resourceRules)
		case "prompts":
			p.Prompts = ps.rules(v, key, promptRules)
		case "methods":
			p.Methods = ps.methods(v, key)
		case "default_cost":
			if c, ok := ps.cost(v, key); ok {
				p.DefaultCost = c
			}
		case "allow_unauthenticated":
			ps.boolean(v, key, &p.AllowUnauthenticated)
		case "honour_upstream_cost":
			ps.boolean(v, key, &p.HonourUpstreamCost)
		case "revocation_list":
			ps.store(v, key, &p.RevocationList)
		case "spend_store":
			ps.store(v, key, &p.SpendStore)
		case "ended_delegations":
			ps.redisURL(v, key, &p.EndedDelegations)
		case "max_frame_bytes":
			if b, ok := ps.integer(v, key, MinFrameBytes, MaxFrameBytesLimit,
				"must be an integer from %d (1 KiB) to %d (1 GiB)", MinFrameBytes, MaxFrameBytesLimit); ok {
				p.MaxFrameBytes = int(b)
			}
		case "log":
			ps.log(v, key, &p.Log)
		case "workspace":
			ps.path(v, key, &p.Workspace)
		case "judge":
			ps.judge(v, key, &p.Judge)
		case "reputation":
			ps.reputation(v, key, &p.Reputation)
		case "upstream_user":
			ps.upstreamUser(v, key, &p.UpstreamUser)
		case "rate":
			p.Rate = ps.rate(v, key)
		case "tool_pins":
			ps.path(v, key, &p.ToolPins)
		case "proxy_key":
			ps.path(v, key, &p.ProxyKey)
		case "audit_log":
			ps.path(v, key, &p.AuditLog)
			if strings.HasSuffix(v.Value, "/") && p.AuditLog != "" && !strings.HasSuffix(p.AuditLog, "/") {
				// A directory of logs, one per process: the slash says so.
				p.AuditLog += "/"
			}
		case "state_dir":
			ps.path(v, key, &p.StateDir)
		case "receipts":
			ps.receipts(v, key, &p.Receipts)
		case "require_signature":
			ps.boolean(v, key, &p.RequireSignature)
		case "ldp":
			ps.ldp(v, key, &p.LDP)
		}
	})
}

// upstreamUser reads USER[:GROUP]; whether the user exists is up to the
// machine the proxy runs on.
func (ps *parser) upstreamUser(n *yaml.Node, key string, out *string) {
	s, ok := ps.str(n, key)
	if !ok {
		return
	}
	u, g, hasGroup := strings.Cut(s, ":")
	if u == "" || (hasGroup && (g == "" || strings.Contains(g, ":"))) || strings.ContainsFunc(s, unicode.IsSpace) {
		ps.errorf(n, key, "must be USER or USER:GROUP (names or numeric IDs), e.g. nobody")
		return
	}
	*out = s
}

// mapping calls fn for each key of a mapping node in order, refusing keys
// that are not strings, unknown or given twice. A null value is skipped: it
// means the same as leaving the key out. It returns the known keys given a
// value other than null, even a bad one.
func (ps *parser) mapping(n *yaml.Node, path string, known []string, fn func(key string, v *yaml.Node)) map[string]bool {
	return ps.mappingExcept(n, path, known, nil, fn)
}

// mappingExcept is mapping where the keys of refused, which are not known,
// are refused with their own message rather than as unknown.
func (ps *parser) mappingExcept(n *yaml.Node, path string, known []string, refused map[string]string,
	fn func(key string, v *yaml.Node)) map[string]bool {
	seen := map[string]int{}
	given := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.ShortTag() == "!!merge" {
			ps.errorf(k, path, "YAML merge keys (<<) are not supported; write the keys out")
			continue
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			ps.errorf(k, path, "keys must be plain names (%s)", strings.Join(known, ", "))
			continue
		}
		key := join(path, k.Value)
		if line, dup := seen[k.Value]; dup {
			ps.errorf(k, key, "given twice (first on line %d)", line)
			continue
		}
		seen[k.Value] = k.Line
		if why, ok := refused[k.Value]; ok {
			ps.errorf(k, key, "%s", why)
			continue
		}
		if !slices.Contains(known, k.Value) {
			if near := nearest(k.Value, known); near != "" {
				ps.errorf(k, key, "unknown key; did you mean %s? (known keys here: %s)", near, strings.Join(known, ", "))
			} else {
				ps.errorf(k, key, "unknown key; known keys here: %s", strings.Join(known, ", "))
			}
			continue
		}
		if isNull(v) {
			continue
		}
		given[k.Value] = true
		if v.Kind == yaml.AliasNode {
			ps.errorf(v, key, "YAML aliases (*name) are not supported; write the value out")
			continue
		}
		fn(k.Value, v)
	}
	return given
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

func (ps *parser) str(n *yaml.Node, key string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		ps.errorf(n, key, "must be a string%s", quoteHint(n))
		return "", false
	}
	return n.Value, true
}

// quoteHint suggests quoting a scalar YAML read as another type.
func quoteHint(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return fmt.Sprintf(" (YAML reads %s as %s; quote it to make it a string)", n.Value, strings.TrimPrefix(n.ShortTag(), "!!"))
	}
	return ""
}

func (ps *parser) boolean(n *yaml.Node, key string, out *bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		ps.errorf(n, key, "must be true or false")
		return
	}
	if err := n.Decode(out); err != nil {
		ps.errorf(n, key, "must be true or false")
	}
}

func (ps *parser) integer(n *yaml.Node, key string, lo, hi int64, format string, args ...any) (int64, bool) {
	var v int64
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil || v < lo || v > hi {
		ps.errorf(n, key, format, args...)
		return 0, false
	}
	return v, true
}

func (ps *parser) cost(n *yaml.Node, key string) (int64, bool) {
	return ps.integer(n, key, 0, MaxCost, "must be a non-negative integer (microcents) of at most %d", int64(MaxCost))
}

func (ps *parser) path(n *yaml.Node, key string, out *string) {
	s, ok := ps.str(n, key)
	if !ok || s == "" {
		return
	}
	if !filepath.IsAbs(s) {
		ps.rel[key] = s
		s = filepath.Join(ps.dir, s)
	}
	*out = s
}

// store reads a store's path, or a redis:// or rediss:// URL kept as it
// is. Anything that starts like a Redis URL in any letter case is read as
// one, so that a typo (Redis://, redis:6379) is an error rather than a
// local file standing in for the fleet's shared store.
func (ps *parser) store(n *yaml.Node, key string, out *string) {
	if low := strings.ToLower(n.Value); n.Kind == yaml.ScalarNode && (strings.HasPrefix(low, "redis:") || strings.HasPrefix(low, "rediss:") || strings.HasPrefix(low, "redis+") || strings.HasPrefix(low, "rediss+")) {
		ps.redisURL(n, key, out)
		return
	}
	ps.path(n, key, out)
}

// redisURL reads a redis:// or rediss:// URL.
func (ps *parser) redisURL(n *yaml.Node, key string, out *string) {
	s, ok := ps.str(n, key)
	if !ok || s == "" {
		return
	}
	u, err := url.Parse(s)
	if err != nil || !redisconn.IsURL(s) || u.Host == "" {
		ps.errorf(n, key, "must be a redis:// or rediss:// URL (redis://HOST:PORT/DB), or a Redis Cluster's redis+cluster://HOST:PORT,HOST:PORT")
		return
	}
	*out = s
}

func (ps *parser) seq(n *yaml.Node, key, what string) []*yaml.Node {
	if n.Kind != yaml.SequenceNode {
		ps.errorf(n, key, "must be a list of %s", what)
		return nil
	}
	return n.Content
}

func (ps *parser) roots(n *yaml.Node, key string) []string {
	items := ps.seq(n, key, "principal IDs or did:key")
	if len(items) > MaxRoots {
		ps.errorf(n, key, "more than %d roots", MaxRoots)
		return nil
	}
	var roots []string
	first := map[string]int{}
	for i, item := range items {
		k := fmt.Sprintf("%s[%d]", key, i)
		s, ok := ps.str(item, k)
		if !ok {
			continue
		}
		id, err := identity.NormalizePrincipal(s)
		if err != nil {
			ps.errorf(item, k, "not a principal ID or did:key: %v", err)
			continue
		}
		if j, dup := first[id]; dup {
			ps.errorf(item, k, "the same principal as %s[%d]", key, j)
			continue
		}
		first[id] = i
		roots = append(roots, id)
	}
	return roots
}

func (ps *parser) log(n *yaml.Node, key string, out *LogConfig) {
	if n.Kind != yaml.MappingNode {
		ps.errorf(n, key, "must be a mapping with file and level")
		return
	}
	ps.mapping(n, key, []string{"file", "level"}, func(k string, v *yaml.Node) {
		switch k {
		case "file":
			ps.path(v, key+".file", &out.File)
		case "level":
			s, ok := ps.str(v, key+".level")
			if ok && !slices.Contains(logLevels, s) {
				ps.errorf(v, key+".level", "must be one of %s", strings.Join(logLevels, ", "))
			} else if ok {
				out.Level = s
			}
		}
	})
}

// ruleKind is which map a rule is in.
type ruleKind int

const (
	toolRules ruleKind = iota
	resourceRules
	promptRules
	ruleKinds // the number of kinds
)

// ruleKeys are the keys of a rule of each kind.
var ruleKeys = [ruleKinds][]string{
	toolRules:     {"match", "namespace", "action", "resource", "cost", "max_cost", "rate", "approval"},
	resourceRules: {"match", "namespace", "action", "cost", "max_cost", "rate", "approval"},
	promptRules:   {"match", "namespace", "action", "resource", "cost", "max_cost", "rate", "approval"},
}

// refusedRuleKeys explain keys a rule of a kind does not take.
var refusedRuleKeys = [ruleKinds]map[string]string{
	resourceRules: {"resource": "a resources rule takes no resource: the capability's resource is always the URI"},
}

// defaultNamespaces are the namespaces of what no rule maps, each the
// kind's own: a rule of another kind may not use it, so that a grant in it
// covers only what it was meant for.
var defaultNamespaces = [ruleKinds]string{
	toolRules:     DefaultNamespace,
	resourceRules: ResourceNamespace,
	promptRules:   PromptNamespace,
}

// kindNames name what each kind of rule maps.
var kindNames = [ruleKinds]string{toolRules: "tools", resourceRules: "resources", promptRules: "prompts"}

func (ps *parser) rules(n *yaml.Node, key string, kind ruleKind) []Rule {
	items := ps.seq(n, key, "rules")
	if len(items) > MaxRules {
		ps.errorf(n, key, "more than %d rules", MaxRules)
		return nil
	}
	rules := make([]Rule, 0, len(items))
	matchNodes := make([]*yaml.Node, 0, len(items))
	for i, item := range items {
		k := fmt.Sprintf("%s[%d]", key, i)
		r, mn, ok := ps.rule(item, k, kind)
		if ok {
			rules = append(rules, r)
			matchNodes = append(matchNodes, mn)
		}
	}
	if len(rules) == 0 {
		return nil
	}
	if len(rules) == len(items) {
		ps.shadowed(rules, matchNodes, key)
	}
	return rules
}

// rule parses one rule; it also returns the node of its match, for errors
// found later.
func (ps *parser) rule(n *yaml.Node, key string, kind ruleKind) (Rule, *yaml.Node, bool) {
	keys := ruleKeys[kind]
	if n.Kind != yaml.MappingNode {
		ps.errorf(n, key, "a rule must be a mapping with %s", strings.Join(keys, ", "))
		return Rule{}, nil, false
	}
	before := len(ps.errs)
	r := Rule{Line: n.Line}
	if kind == toolRules {
		r.Resource = Resource{Value: "*"}
	}
	var matchNode, maxCostNode *yaml.Node
	present := ps.mappingExcept(n, key, keys, refusedRuleKeys[kind], func(k string, v *yaml.Node) {
		vk := key + "." + k
		switch k {
		case "match":
			matchNode = v
			r.Match, r.glob = ps.match(v, vk, kind)
			if r.glob != nil {
				r.prefix = literalPrefix(r.Match)
			}
		case "namespace":
			r.Namespace = ps.name(v, vk)
			ps.ownNamespace(v, vk, kind, r.Namespace)
		case "action":
			r.Action = ps.name(v, vk)
		case "resource":
			if kind == promptRules {
				r.Resource = ps.promptResource(v, vk)
			} else {
				r.Resource = ps.resource(v, vk)
			}
		case "cost":
			if c, ok := ps.cost(v, vk); ok {
				r.Cost = &c
			}
		case "max_cost":
			if c, ok := ps.cost(v, vk); ok {
				r.MaxCost, maxCostNode = &c, v
			}
		case "rate":
			r.Rate = ps.rate(v, vk)
		case "approval":
			r.Approval = ps.approval(v, vk)
		}
	})
	for _, req := range []string{"match", "namespace", "action"} {
		if !present[req] {
			ps.errorf(n, key, "%s is required", req)
		}
	}
	ok := len(ps.errs) == before
	if ok && r.MaxCost != nil {
		ps.maxCosts = append(ps.maxCosts, maxCostCheck{node: maxCostNode, key: key + ".max_cost", cost: r.Cost, maxCost: *r.MaxCost})
	}
	return r, matchNode, ok
}

// ownNamespace refuses a namespace that is another kind's default.
func (ps *parser) ownNamespace(n *yaml.Node, key string, kind ruleKind, ns string) {
	for other, dns := range defaultNamespaces {
		if ns == dns && ruleKind(other) != kind {
			ps.errorf(n, key, "%s is the namespace of %s no rule maps; a %s rule must use another, so that a grant in %s covers %s only",
				ns, kindNames[other], strings.TrimSuffix(kindNames[kind], "s"), ns, kindNames[other])
		}
	}
}

// checkMaxCosts refuses a max_cost below what its rule costs.
func (ps *parser) checkMaxCosts(defaultCost int64) {
	for _, m := range ps.maxCosts {
		switch {
		case m.cost != nil && m.maxCost < *m.cost:
			ps.errorf(m.node, m.key, "%d is less than the rule's cost %d; a reported cost is capped at max_cost, "+
				"so it must be at least the cost: raise it to %d or more, or remove it", m.maxCost, *m.cost, *m.cost)
		case m.cost == nil && m.maxCost < defaultCost:
			ps.errorf(m.node, m.key, "%d is less than default_cost %d, which the rule costs; a reported cost is capped at max_cost, "+
				"so it must be at least the cost: raise it to %d or more, or remove it", m.maxCost, defaultCost, defaultCost)
		}
	}
}

// match reads a rule's match: an exact name or URI, or a glob, compiled.
func (ps *parser) match(n *yaml.Node, key string, kind ruleKind) (string, *regexp.Regexp) {
	s, ok := ps.str(n, key)
	switch {
	case !ok:
		return "", nil
	case s == "":
		ps.errorf(n, key, "must not be empty")
		return "", nil
	case len(s) > MaxMatchLen:
		ps.errorf(n, key, "longer than %d bytes", MaxMatchLen)
		return "", nil
	case strings.ContainsRune(s, 0):
		// The glob library reads NUL as the end of the pattern.
		ps.errorf(n, key, "must not contain NUL")
		return "", nil
	case isExact(s):
		if why := uriProblem(s); kind == resourceRules && why != "" {
			ps.errorf(n, key, "never applies: the proxy refuses a URI that %s", why)
			return "", nil
		}
		return s, nil // compared as it is: faster, and no glob semantics to doubt
	}
	g, err := compileGlob(s, kind == resourceRules)
	if err != nil {
		ps.errorf(n, key, "not a valid glob: %v", err)
		return "", nil
	}
	return s, g
}

// name reads a namespace or action.
func (ps *parser) name(n *yaml.Node, key string) string {
	s, ok := ps.str(n, key)
	if !ok {
		return ""
	}
	if err := checkName(s); err != nil {
		ps.errorf(n, key, "%v", err)
		return ""
	}
	return s
}

// checkName checks a namespace or action in a rule. It names what a call
// requests, so it must be a value a token can grant and the CLI can write.
func checkName(s string) error {
	switch {
	case s == "":
		return errors.New("must not be empty")
	case s == "*":
		return errors.New(`must name what a call requests; "*" is only meaningful in a token's grant`)
	case strings.Contains(s, ":"):
		return errors.New("must not contain ':' (capabilities are written NAMESPACE:ACTION:RESOURCE)")
	case len(s) > dct.MaxStringLen:
		return fmt.Errorf("longer than %d bytes, which no token can grant", dct.MaxStringLen)
	case !utf8.ValidString(s):
		return errors.New("not valid UTF-8")
	}
	return nil
}

func (ps *parser) resource(n *yaml.Node, key string) Resource {
	switch {
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str":
		if n.Value == "" {
			ps.errorf(n, key, `must not be empty; "*" requests every resource`)
		}
		return Resource{Value: n.Value}
	case n.Kind != yaml.MappingNode:
		ps.errorf(n, key, "must be a string or a mapping {arg: JSON pointer, prefix: string}")
		return Resource{}
	}
	var r Resource
	given := ps.mapping(n, key, []string{"arg", "prefix"}, func(k string, v *yaml.Node) {
		s, ok := ps.str(v, key+"."+k)
		if !ok {
			return
		}
		if k == "prefix" {
			r.Prefix = s
			return
		}
		tokens, err := parsePointer(s)
		if err != nil {
			ps.errorf(v, key+".arg", "%v", err)
			return
		}
		r.Arg, r.tokens = s, tokens
	})
	if !given["arg"] {
		ps.errorf(n, key, "arg is required: a JSON pointer such as /path to the argument holding the resource")
	}
	return r
}

// promptResource reads a prompt rule's resource: a literal, or the
// argument of prompts/get that holds it ({arg, prefix}, as for a tool).
func (ps *parser) promptResource(n *yaml.Node, key string) Resource {
	if n.Kind == yaml.MappingNode {
		return ps.resource(n, key)
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		ps.errorf(n, key, "must be a string (a literal) or a mapping {arg: JSON pointer, prefix: string}; leave it out to use the prompt's name%s", quoteHint(n))
		return Resource{}
	}
	if n.Value == "" {
		ps.errorf(n, key, `must not be empty; leave it out to use the prompt's name, or write "*"`)
	}
	return Resource{Value: n.Value}
}

// shadowed refuses rules that can never apply because an earlier rule
// matches everything they match: an exact name an earlier glob matches, or
// a pattern given twice. (Overlapping globs are allowed; order decides.)
func (ps *parser) shadowed(rules []Rule, matchNodes []*yaml.Node, key string) {
	for j := range rules {
		exact := rules[j].glob == nil
		for i := range j {
			if rules[i].Match == rules[j].Match || exact && rules[i].matches(rules[j].Match) {
				ps.errorf(matchNodes[j], fmt.Sprintf("%s[%d].match", key, j),
					"%q never applies: %s[%d] (match %q, line %d) comes first and matches it",
					rules[j].Match, key, i, rules[i].Match, rules[i].Line)
				break
			}
		}
	}
}

func (ps *parser) judge(n *yaml.Node, key string, out *JudgeConfig) {
	if n.Kind != yaml.MappingNode {
		ps.errorf(n, key, "must be a mapping with command and timeout")
		return
	}
	ps.mapping(n, key, []string{"command", "timeout"}, func(k string, v *yaml.Node) {
		vk := key + "." + k
		switch k {
		case "command":
			items := ps.seq(v, vk, "strings: the program and its arguments")
			if len(items) == 0 && v.Kind == yaml.SequenceNode {
				ps.errorf(v, vk, "must name a program")
				return
			}
			var argv []string
			for i, item := range items {
				s, ok := ps.str(item, fmt.Sprintf("%s[%d]", vk, i))
				if !ok {
					return
				}
				if i == 0 && s == "" {
					ps.errorf(item, vk, "the program must not be empty")
					return
				}
				if i == 0 && !filepath.IsAbs(s) && strings.ContainsRune(s, '/') {
					s = filepath.Join(ps.dir, s)
				}
				argv = append(argv, s)
			}
			out.Command = argv
		case "timeout":
			s, ok := ps.str(v, vk)
			if !ok {
				return
			}
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 || d > MaxJudgeTimeout {
				ps.errorf(v, vk, "must be a duration such as 30s or 2m, at most %s", MaxJudgeTimeout)
				return
			}
			out.Timeout = d
		}
	})
}

func (ps *parser) reputation(n *yaml.Node, key string, out *ReputationConfig) {
	if n.Kind != yaml.MappingNode {
		ps.errorf(n, key, "must be a mapping with completeness, clarity and trust_gate")
		return
	}
	ps.mapping(n, key, []string{"completeness", "clarity", "trust_gate"}, func(k string, v *yaml.Node) {
		vk := key + "." + k
		switch k {
		case "completeness":
			if f, ok := ps.unit(v, vk); ok {
				out.Completeness = &f
			}
		case "clarity":
			if f, ok := ps.unit(v, vk); ok {
				out.Clarity = &f
			}
		case "trust_gate":
			if v.Kind != yaml.MappingNode {
				ps.errorf(v, vk, "must be a mapping with min_reliability and min_confidence")
				return
			}
			g := &TrustGate{}
			present := ps.mapping(v, vk, []string{"min_reliability", "min_confidence", "starter_floor"}, func(gk string, gv *yaml.Node) {
				if gk == "starter_floor" {
					g.StarterFloor = ps.starterFloor(gv, vk+"."+gk)
					return
				}
				f, ok := ps.unit(gv, vk+"."+gk)
				if !ok {
					return
				}
				if gk == "min_reliability" {
					g.MinReliability = f
				} else {
					g.MinConfidence = f
				}
			})
			if !present["min_reliability"] {
				ps.errorf(v, vk, "min_reliability is required")
				return
			}
			out.TrustGate = g
		}
	})
}

// MaxTrustedAttesters bounds starter_floor.trusted_attesters.
const MaxTrustedAttesters = 1024

// starterFloor reads reputation.trust_gate.starter_floor.
func (ps *parser) starterFloor(n *yaml.Node, key string) *StarterFloor {
	if n.Kind != yaml.MappingNode {
		ps.errorf(n, key, "must be a mapping with trusted_attesters and min_attesters")
		return nil
	}
	f := &StarterFloor{MinAttesters: 3}
	present := ps.mapping(n, key, []string{"trusted_attesters", "min_attesters"}, func(k string, v *yaml.Node) {
		switch k {
		case "trusted_attesters":
			if v.Kind == yaml.SequenceNode && len(v.Content) > MaxTrustedAttesters {
				ps.errorf(v, key+"."+k, "more than %d attesters", MaxTrustedAttesters)
				return
			}
			f.TrustedAttesters = ps.roots(v, key+"."+k)
		case "min_attesters":
			if m, ok := ps.integer(v, key+"."+k, 1, MaxTrustedAttesters, "must be an integer from 1 to %d", MaxTrustedAttesters); ok {
				f.MinAttesters = int(m)
			}
		}
	})
	if !present["trusted_attesters"] {
		ps.errorf(n, key, "trusted_attesters is required: the principal IDs or did:key whose attestations lift the floor")
	}
	return f
}

// unit reads a number from 0 to 1.
func (ps *parser) unit(n *yaml.Node, key string) (float64, bool) {
	var f float64
	tag := n.ShortTag()
	if n.Kind != yaml.ScalarNode || (tag != "!!float" && tag != "!!int") || n.Decode(&f) != nil || !(f >= 0 && f <= 1) {
		ps.errorf(n, key, "must be a number from 0 to 1")
		return 0, false
	}
	return f, true
}

// nearest returns the known key a mistyped key most likely meant: the one
// within two edits (insert, delete, substitute, swap adjacent), if exactly
// one is that close.
func nearest(key string, known []string) string {
	best, bestDist, ties := "", 3, 0
	for _, k := range known {
		d := editDistance(strings.ToLower(key), k)
		switch {
		case d < bestDist:
			best, bestDist, ties = k, d, 0
		case d == bestDist:
			ties++
		}
	}
	if bestDist > 2 || ties > 0 || len(key) > 64 {
		return ""
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
