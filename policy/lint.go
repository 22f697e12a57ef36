package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/delegateos/delegateos/internal/redisconn"
)

// Warning is something a valid policy file says that is almost certainly
// not what its author meant: the proxy would refuse to start, or deny
// every call, or a rule would never apply.
type Warning struct {
	// File is the policy file's path as given to Lint; "" otherwise.
	File string
	// Line is 1-based; 0 when the warning has no line.
	Line int
	// Key locates the value, e.g. "tools[1].match".
	Key string
	Msg string
}

func (w *Warning) String() string {
	var b strings.Builder
	switch {
	case w.File != "" && w.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", w.File, w.Line)
	case w.File != "":
		fmt.Fprintf(&b, "%s: ", w.File)
	case w.Line > 0:
		fmt.Fprintf(&b, "line %d: ", w.Line)
	}
	b.WriteString("warning: ")
	if w.Key != "" {
		b.WriteString(w.Key + ": ")
	}
	b.WriteString(w.Msg)
	return b.String()
}

// Lint loads the policy file at path as Load does, and also returns its
// warnings, looking at this machine where the file names something on it:
//   - a file that sets nothing (empty, comments only, or null): as with
//     roots: [], every call is denied;
//   - roots given as an empty list while calls without a token are
//     refused: no token can be verified, so every call is denied (unless
//     the proxy is given --root);
//   - a revocation_list file that does not exist: the proxy refuses to
//     start without it;
//   - an upstream_user that this machine does not know;
//   - rate limits without a spend_store, which keep their windows in
//     memory only.
//   - a tool_pins lock file that does not exist (one that is not a valid
//     lock file is an error, as a problem in the policy is).
//
// Rules are checked against an upstream with CheckOffered.
func Lint(path string) (*Policy, []*Warning, error) {
	p, lines, err := load(path)
	if err != nil {
		return nil, nil, err
	}
	var ws []*Warning
	warn := func(key, format string, args ...any) {
		ws = append(ws, &Warning{File: path, Line: lines[key], Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if len(lines) == 0 {
		// Nothing set: every call is denied for want of roots, as with
		// roots: [], and every tool needs mcp:<tool>:*.
		ws = append(ws, &Warning{File: path, Msg: "the file sets nothing, so every setting is its default: no roots, so no token can be verified and every call is denied, and no rules, so each tool needs " + DefaultNamespace + ":<tool>:*; write a starter policy with 'delegateos policy init --out FILE -- UPSTREAM_COMMAND', or give the proxy --root"})
	}
	if _, given := lines["roots"]; given && len(p.Roots) == 0 && !p.AllowUnauthenticated {
		warn("roots", "the list is empty, so no token can be verified and every call is denied; list the principal IDs (or did:keys) of the keys that mint your tokens, or give them to the proxy with --root")
	}
	if p.RevocationList != "" && !isRedisURL(p.RevocationList) {
		if _, err := os.Stat(p.RevocationList); errors.Is(err, fs.ErrNotExist) {
			warn("revocation_list", "%s does not exist, and the proxy refuses to start without it; create it (an empty list is []), or fix the path", p.RevocationList)
		} else if err != nil {
			warn("revocation_list", "%s cannot be read (%v), and the proxy refuses to start without it", p.RevocationList, err)
		}
	}
	if p.UpstreamUser != "" {
		if msg := unknownUser(p.UpstreamUser); msg != "" {
			warn("upstream_user", "%s", msg)
		}
	}
	if key := firstRate(p); key != "" && p.SpendStore == "" {
		warn(key, "rate limits without a spend_store are kept in memory only: each start of the proxy (an MCP client starts one a session) begins every window afresh; set spend_store, and the windows are kept next to it")
	}
	if p.ToolPins != "" {
		_, err := LoadPins(p.ToolPins)
		var problems Errors
		switch {
		case errors.As(err, &problems):
			return nil, nil, problems
		case errors.Is(err, fs.ErrNotExist):
			warn("tool_pins", "%s does not exist, and the proxy refuses to start without it; write it with 'delegateos pin --policy %s -- UPSTREAM...', or fix the path", p.ToolPins, path)
		case err != nil:
			warn("tool_pins", "%s cannot be read (%v), and the proxy refuses to start without it", p.ToolPins, err)
		}
	}
	return p, ws, nil
}

// unknownUser says what in USER[:GROUP] this machine does not know, or "".
func unknownUser(spec string) string {
	name, group, hasGroup := strings.Cut(spec, ":")
	if _, err := strconv.ParseUint(name, 10, 32); err == nil {
		if _, err := user.LookupId(name); err != nil && !hasGroup {
			return fmt.Sprintf("uid %s has no entry in this machine's user database, so the proxy cannot tell its group; write %s:GROUP", name, name)
		}
	} else if _, err := user.Lookup(name); err != nil {
		return fmt.Sprintf("there is no user %q on this machine, so the proxy would refuse to start here", name)
	}
	if hasGroup {
		if _, err := strconv.ParseUint(group, 10, 32); err != nil {
			if _, err := user.LookupGroup(group); err != nil {
				return fmt.Sprintf("there is no group %q on this machine, so the proxy would refuse to start here", group)
			}
		}
	}
	return ""
}

// Offered is what an upstream MCP server offers, as its list methods
// report it (every page).
type Offered struct {
	// Tools are the names tools/list returned.
	Tools []string
	// Prompts are the names prompts/list returned; nil when the upstream
	// offers no prompts (its prompt rules are then not compared).
	Prompts []string
}

// Unmatched is a name an upstream offers that no rule of its section
// matches: a call to it needs the default capability.
type Unmatched struct {
	// Section is the policy key of the rules, e.g. "tools".
	Section string
	Name    string
	// Default is the capability a call needs, e.g. mcp:get_time:*.
	Default string
}

// ruleSection is one list of rules and the names of the upstream that its
// rules map. Each section of the policy that maps something an upstream
// lists is one entry of sections.
type ruleSection struct {
	key      string // the policy key, e.g. "tools"
	what     string // one offered thing, e.g. "tool"
	rules    []Rule
	offered  []string
	fallback func(name string) string
}

func (p *Policy) sections(o Offered) []ruleSection {
	secs := []ruleSection{{
		key: "tools", what: "tool", rules: p.Tools, offered: o.Tools,
		fallback: func(name string) string { return DefaultNamespace + ":" + name + ":*" },
	}}
	if o.Prompts != nil {
		secs = append(secs, ruleSection{
			key: "prompts", what: "prompt", rules: p.Prompts, offered: o.Prompts,
			fallback: func(name string) string { return PromptNamespace + ":" + PromptAction + ":" + name },
		})
	}
	return secs
}

// CheckOffered compares the rules with what an upstream offers. It warns
// for each rule that decides for none of the upstream's names (it matches
// none, or an earlier rule comes first for each it matches), and returns
// the offered names no rule matches, in the upstream's order.
func (p *Policy) CheckOffered(o Offered) ([]*Warning, []Unmatched) {
	var ws []*Warning
	var unmatched []Unmatched
	for _, sec := range p.sections(o) {
		decides := make([]int, len(sec.rules)) // how many names each rule decides
		matched := make([][]string, len(sec.rules))
		for _, name := range sec.offered {
			first := -1
			for i := range sec.rules {
				if sec.rules[i].matches(name) {
					matched[i] = append(matched[i], name)
					if first < 0 {
						first = i
					}
				}
			}
			if first < 0 {
				unmatched = append(unmatched, Unmatched{Section: sec.key, Name: name, Default: sec.fallback(name)})
				continue
			}
			decides[first]++
		}
		for i, r := range sec.rules {
			if decides[i] > 0 {
				continue
			}
			w := &Warning{Line: r.Line, Key: fmt.Sprintf("%s[%d].match", sec.key, i)}
			if len(matched[i]) == 0 {
				w.Msg = fmt.Sprintf("%q matches none of the upstream's %d %s", r.Match, len(sec.offered), plural(len(sec.offered), sec.what))
			} else {
				w.Msg = fmt.Sprintf("%q matches %s, but an earlier rule comes first for %s", r.Match, quoteList(matched[i]), plural(len(matched[i]), "it"))
			}
			ws = append(ws, w)
		}
	}
	return ws, unmatched
}

func plural(n int, one string) string {
	switch {
	case n == 1:
		return one
	case one == "it":
		return "each"
	}
	return one + "s"
}

// quoteList quotes up to five names and counts the rest.
func quoteList(names []string) string {
	const show = 5
	q := make([]string, 0, show)
	for i, n := range names {
		if i == show {
			break
		}
		q = append(q, strconv.Quote(n))
	}
	s := strings.Join(q, ", ")
	if len(names) > show {
		s += fmt.Sprintf(" and %d more", len(names)-show)
	}
	return s
}

// firstRate names the first place the policy sets a rate: the top-level
// key, or the map of the first rule with one; "" if it sets none.
func firstRate(p *Policy) string {
	if !p.Rate.IsZero() {
		return "rate"
	}
	for i, rules := range [ruleKinds][]Rule{p.Tools, p.Resources, p.Prompts} {
		for _, r := range rules {
			if !r.Rate.IsZero() {
				return kindNames[i]
			}
		}
	}
	return ""
}

// isRedisURL reports whether a store is named by a Redis URL, not a path.
func isRedisURL(s string) bool {
	return redisconn.IsURL(s)
}
