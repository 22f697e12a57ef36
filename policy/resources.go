package policy

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/delegateos/delegateos/dct"
)

// MapResource maps a resource URI — of resources/read, resources/subscribe,
// or a completion/complete that refers to a resource — to the capability it
// needs and its cost. The first rule of Resources whose match fits the URI
// gives the namespace, action and costs; the resource is always the URI
// itself, byte for byte. A URI no rule matches needs
// mcp-resource:read:<URI> at DefaultCost.
//
// A URI a server might read as another path than the one the gate matched
// cannot be mapped: one that is empty or longer than MaxURILen, is not
// UTF-8, or holds a control character, a backslash, a percent-encoded '/',
// '\' or unreserved character (a letter, digit, '-', '.', '_' or '~', which
// RFC 3986 makes the same URI as the character itself), or a "." or ".."
// segment (also when a query or fragment follows it, as in "/a/..?x"). The
// error wraps ErrUnmappable.
//
// Rules and grants match the URI's text. Other spellings of the same
// resource that pass these checks — a scheme or host in capitals,
// file://localhost/ for file:/// — match other rules, or none: a rule
// cannot carve URIs out of a wider grant, so grant what a token may read.
func (p *Policy) MapResource(uri string) (Call, error) {
	if why := uriProblem(uri); why != "" {
		return Call{Rule: -1}, fmt.Errorf("%w: the resource URI %s", ErrUnmappable, why)
	}
	i := firstRule(p.Resources, uri)
	if i < 0 {
		return Call{Namespace: ResourceNamespace, Action: ResourceAction, Resource: uri,
			Cost: p.DefaultCost, MaxCost: p.DefaultCost, Rule: -1}, nil
	}
	c := p.ruleCall(&p.Resources[i], i)
	c.Resource = uri
	return c, nil
}

// MapPrompt maps the name of a prompt — of prompts/get, or of a
// completion/complete that refers to a prompt — to the capability it needs
// and its cost. The first rule of Prompts whose match fits the name gives
// the namespace, action, costs and resource: the rule's literal resource,
// else the name. A prompt no rule matches needs mcp-prompt:get:<name> at
// DefaultCost. A name that is empty or longer than MaxPromptNameLen cannot
// be mapped; the error wraps ErrUnmappable.
func (p *Policy) MapPrompt(name string, arguments json.RawMessage) (Call, error) {
	if name == "" || len(name) > MaxPromptNameLen {
		return Call{Rule: -1}, fmt.Errorf("%w: a prompt name must be 1 to %d bytes", ErrUnmappable, MaxPromptNameLen)
	}
	i := firstRule(p.Prompts, name)
	if i < 0 {
		return Call{Namespace: PromptNamespace, Action: PromptAction, Resource: name,
			Cost: p.DefaultCost, MaxCost: p.DefaultCost, Rule: -1}, nil
	}
	r := &p.Prompts[i]
	c := p.ruleCall(r, i)
	if r.Resource.Arg != "" {
		// The prompt reads what its argument names: the request must
		// give it (a completion, which gives none, is refused).
		return c, r.argResource(&c, i, "prompt", name, arguments)
	}
	c.Resource = r.Resource.Value
	if c.Resource == "" {
		c.Resource = name
	}
	return c, nil
}

// ResourceVisible reports whether a token granting caps could read the
// resource at uri: whether MapResource maps it and a capability covers what
// it needs. The proxy shows only visible resources in resources/list.
func (p *Policy) ResourceVisible(uri string, caps []dct.Capability) bool {
	c, err := p.MapResource(uri)
	return err == nil && covers(caps, c)
}

// PromptVisible reports whether a token granting caps could get the prompt
// name; the proxy shows only visible prompts in prompts/list.
func (p *Policy) PromptVisible(name string, caps []dct.Capability) bool {
	if i := firstRule(p.Prompts, name); i >= 0 && p.Prompts[i].Resource.Arg != "" && name != "" && len(name) <= MaxPromptNameLen {
		// As for a tool: a grant of the namespace and action on any
		// resource may suit some argument.
		r := &p.Prompts[i]
		for _, g := range caps {
			g.Resource = "*" // judge namespace and action as verification will
			if g.Covers(r.Namespace, r.Action, "*") {
				return true
			}
		}
		return false
	}
	c, err := p.MapPrompt(name, nil)
	return err == nil && covers(caps, c)
}

func covers(caps []dct.Capability, c Call) bool {
	for _, g := range caps {
		if g.Covers(c.Namespace, c.Action, c.Resource) {
			return true
		}
	}
	return false
}

// ResourceTemplateVisible reports whether a token granting caps could read
// some resource an entry of resources/templates/list describes: an RFC 6570
// URI template. A template without expressions is the URI itself. For one
// with expressions, let P be its literal text before the first '{': every
// URI the template expands to begins with P, or with P as RFC 6570 writes
// literals (the characters a URI cannot hold percent-encoded), so both are
// tried. The template is visible when a capability covers
//
//   - the URI of a resource rule with an exact match that begins with P, or
//   - the namespace and action of the default mapping, or of a resource
//     rule with a glob whose literal beginning and P agree as far as both
//     go, and some URI beginning with P (dct.MatchResourcePrefix, which is
//     exact),
//
// unless MapResource refuses every URI beginning with P (P holds a
// backslash, say). The rule errs only towards showing: a template is
// hidden only when no URI it expands to could be read, and showing more
// grants nothing, since every read is mapped and checked on its own URI.
func (p *Policy) ResourceTemplateVisible(uriTemplate string, caps []dct.Capability) bool {
	open := strings.IndexByte(uriTemplate, '{')
	if open < 0 {
		// The URI itself, written as it is or as RFC 6570 expands literals.
		return p.ResourceVisible(uriTemplate, caps) || p.ResourceVisible(encodeTemplateLiteral(uriTemplate), caps)
	}
	raw := uriTemplate[:open]
	for i, prefix := range []string{raw, encodeTemplateLiteral(raw)} {
		if i == 1 && prefix == raw || uriPrefixRefused(prefix) {
			continue
		}
		for _, g := range caps {
			for j := range p.Resources {
				if r := &p.Resources[j]; r.glob == nil && strings.HasPrefix(r.Match, prefix) && g.Covers(r.Namespace, r.Action, r.Match) {
					return true
				}
			}
			if !dct.MatchResourcePrefix(g.Resource, prefix) {
				continue
			}
			// Judge namespace and action exactly as verification will.
			g.Resource = "*"
			if g.Covers(ResourceNamespace, ResourceAction, "*") {
				return true
			}
			for j := range p.Resources {
				if r := &p.Resources[j]; r.glob != nil && r.globCouldMatchPrefix(prefix) && g.Covers(r.Namespace, r.Action, "*") {
					return true
				}
			}
		}
	}
	return false
}

// globCouldMatchPrefix reports, erring towards yes, whether a resource
// rule's glob could match some URI that begins with prefix.
func (r *Rule) globCouldMatchPrefix(prefix string) bool {
	return strings.HasPrefix(prefix, r.prefix) || strings.HasPrefix(r.prefix, prefix)
}

// uriProblem says why MapResource refuses uri, or "".
func uriProblem(uri string) string {
	switch {
	case uri == "":
		return "is empty"
	case len(uri) > MaxURILen:
		return fmt.Sprintf("is longer than %d bytes", MaxURILen)
	}
	if why := uriTextProblem(uri); why != "" {
		return why
	}
	if dotSegment(uri, true) {
		return "has a '.' or '..' segment, which a server may resolve to another path"
	}
	return ""
}

// uriPrefixRefused reports whether MapResource refuses every URI that begins
// with prefix.
func uriPrefixRefused(prefix string) bool {
	if len(prefix) > MaxURILen {
		return true
	}
	// Only the prefix's whole segments are judged: the last may go on.
	// (uriTextProblem judges only escapes wholly inside the prefix.)
	return uriTextProblem(prefix) != "" || dotSegment(prefix, false)
}

// uriTextProblem names a character of uri a server might decode into a
// path separator or a dot segment, or that has no place in a URI.
func uriTextProblem(uri string) string {
	if !utf8.ValidString(uri) {
		return "is not valid UTF-8"
	}
	for i := 0; i < len(uri); i++ {
		switch c := uri[i]; {
		case c < 0x20 || c == 0x7f:
			return "holds a control character"
		case c == '\\':
			return "holds a backslash, which a server may read as '/'"
		case c == '%' && i+2 < len(uri) && isHex(uri[i+1]) && isHex(uri[i+2]):
			switch d := unhex(uri[i+1])<<4 | unhex(uri[i+2]); {
			case d == '.' || d == '/' || d == '\\':
				return "holds a percent-encoded '.', '/' or '\\', which a server may decode into a path"
			case unreserved(d):
				return "holds a percent-encoded letter, digit, '-', '_' or '~', which is the same URI as the character " +
					"itself (RFC 3986, section 2.3) and so may name what the rules and grants matched under another spelling"
			}
		}
	}
	return ""
}

// dotSegment reports whether a '/'-separated segment of uri is "." or "..",
// also when a query, a fragment or path parameters (";") follow it, or
// when it is dots and spaces only ("...", ". "); the last segment counts
// only when last is set.
func dotSegment(uri string, last bool) bool {
	for {
		seg, rest, more := strings.Cut(uri, "/")
		if !more && !last {
			return false
		}
		// Path parameters (";", RFC 3986 §3.3, also written %3B) are cut
		// off before normalizing by servlet containers and many proxies.
		if i := strings.IndexAny(seg, "?#;"); i >= 0 {
			seg = seg[:i]
		}
		if i := strings.Index(strings.ToLower(seg), "%3b"); i >= 0 {
			seg = seg[:i]
		}
		// Windows drops trailing dots and spaces: "... " is "..".
		if strings.Contains(seg, ".") && strings.Trim(seg, ". ") == "" {
			return true
		}
		if !more {
			return false
		}
		uri = rest
	}
}

// encodeTemplateLiteral writes template literal text as RFC 6570 (§3.1)
// expands it: characters allowed in a URI, and percent escapes, as they
// are; any other character percent-encoded as UTF-8.
func encodeTemplateLiteral(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) || c < utf8.RuneSelf && uriChar(c) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// uriChar reports whether c is an RFC 3986 unreserved or reserved
// character.
func uriChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		strings.IndexByte("-._~:/?#[]@!$&'()*+,;=", c) >= 0
}

// unreserved reports whether c is an RFC 3986 unreserved character.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
