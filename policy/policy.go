package policy

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/internal/redisconn"
)

// UpstreamCostKey is the member of a tools/call result's _meta in which an
// upstream may report what the call actually cost, in microcents. The proxy
// reads it only when HonourUpstreamCost is set.
const UpstreamCostKey = "delegateos/costMicrocents"

// The capabilities of what no rule maps. Each namespace belongs to one kind
// of request: Parse refuses a rule that maps another kind into it, so a
// grant on mcp-resource covers resources and nothing else.
const (
	// DefaultNamespace is the namespace of a tool no rule matches: the
	// action is the tool's name and the resource "*".
	DefaultNamespace = "mcp"
	// ResourceNamespace and ResourceAction are the namespace and action of
	// a resource URI no rule matches; the resource is the URI.
	ResourceNamespace = "mcp-resource"
	ResourceAction    = "read"
	// PromptNamespace and PromptAction are the namespace and action of a
	// prompt no rule matches; the resource is the prompt's name.
	PromptNamespace = "mcp-prompt"
	PromptAction    = "get"
)

// Policy is a parsed policy file. Build it with Load, Parse or Default: Parse
// compiles the rules' globs, and a Rule built in code matches only the exact
// tool name in its Match.
type Policy struct {
	// Roots are the trusted root principals, normalized to principal IDs.
	Roots []string
	// Tools is the tool map; the first rule that matches a tool wins.
	Tools []Rule
	// Resources is the resource map, matched against a resource's URI; the
	// first rule that matches wins. The capability's resource is always the
	// URI, so a rule's Resource is not used.
	Resources []Rule
	// Prompts is the prompt map, matched against a prompt's name; the first
	// rule that matches wins. A rule's resource is its literal
	// Resource.Value, or the prompt's name when that is "".
	Prompts []Rule
	// Methods are the vendor extension methods the gate lets through, each
	// gated by its capability like a tools/call; any other method MCP
	// does not define is refused.
	Methods []MethodRule
	// DefaultCost is the cost, in microcents, of a call whose rule sets no
	// cost or that no rule matches.
	DefaultCost int64
	// Rate limits every request the gate decides, whatever rule maps it,
	// at each delegation of its token's chain; the zero Rate sets none.
	Rate Rate
	// AllowUnauthenticated forwards calls that carry no token at all.
	AllowUnauthenticated bool
	// HonourUpstreamCost trusts the cost an upstream reports under
	// UpstreamCostKey in a result's _meta, up to the call's MaxCost.
	HonourUpstreamCost bool
	// RevocationList and SpendStore are paths, resolved against the policy
	// file's directory, or redis:// or rediss:// URLs of stores a fleet of
	// proxies shares, kept as written; "" means not set.
	RevocationList string
	SpendStore     string
	// EndedDelegations is the redis:// or rediss:// URL of the set of
	// ended delegations the proxies of a fleet share, besides each one's
	// workspace; "" means the workspace's chain log alone.
	EndedDelegations string
	// MaxFrameBytes bounds one JSON-RPC message.
	MaxFrameBytes int
	// Log says where and how much the proxy logs.
	Log LogConfig
	// Workspace is the directory where delegations, task contracts,
	// attestations and the RDP reputation workspace are kept, resolved like
	// the other paths; "" means the proxy does not handle the delegation
	// messages (delegateos/delegate, complete, revoke).
	Workspace string
	// Judge runs the llm_judge verification method.
	Judge JudgeConfig
	// Reputation says how completed delegations are evaluated and which
	// delegates may be given work.
	Reputation ReputationConfig
	// UpstreamUser is USER[:GROUP] (names or numeric IDs) the upstream runs
	// as, so that it cannot read the proxy's token, memory or files; ""
	// runs it as the proxy's own user.
	UpstreamUser string
	// ToolPins is the lock file (resolved like the other paths) holding the
	// approved definitions of the upstream's tools, prompts and resource
	// templates (see Pins); "" means definitions are not pinned.
	ToolPins string
	// ProxyKey is the key file (resolved like the other paths) the proxy
	// signs receipts with; AuditLog is the audit log file the receipts are
	// appended to ("" writes none), or, ending in "/", the directory in
	// which each proxy keeps a log of its own; Receipts says what they
	// contain.
	ProxyKey string
	AuditLog string
	// StateDir, when set, is where the files the gate writes are kept
	// when the policy names them by relative paths (StatePaths): the
	// policy's own directory may be read-only (/etc under systemd's
	// ProtectSystem). See UseStateDir.
	StateDir string
	// relative holds the paths the policy wrote relative, by key.
	relative map[string]string
	Receipts ReceiptsConfig
	// RequireSignature makes delegateos serve require an AVP-Sig v2
	// signature by the token's holder on every HTTP request
	// (holder-of-key); the stdio proxy has no HTTP requests to sign.
	RequireSignature bool
	// LDP, when set, makes delegateos serve an LDP delegate (docs/ldp.md).
	LDP *LDPConfig
}

// JudgeConfig is the judge section: the local command that scores an output
// for llm_judge (it reads the rendered prompt on stdin and prints
// {"score": S, "reasoning": "..."}).
type JudgeConfig struct {
	// Command is the argv of the judge; empty means llm_judge is refused.
	Command []string
	// Timeout bounds one run of the command; 0 means DefaultJudgeTimeout.
	Timeout time.Duration
}

// ReputationConfig is the reputation section.
type ReputationConfig struct {
	// Completeness and Clarity are the scores given to those RDP criteria
	// when the proxy evaluates a completed delegation (an operator may
	// evaluate again later); nil means DefaultCriterionScore.
	Completeness, Clarity *float64
	// TrustGate, when set, refuses delegateos/delegate to a delegate whose
	// decayed reliability is below MinReliability once its confidence is
	// at least MinConfidence. Unknown agents are not refused.
	TrustGate *TrustGate
}

// TrustGate is the reputation.trust_gate section.
type TrustGate struct {
	MinReliability float64 `json:"min_reliability"`
	MinConfidence  float64 `json:"min_confidence"`
	// StarterFloor is trust_gate.starter_floor: AVP's starter floor.
	StarterFloor *StarterFloor `json:"starter_floor,omitempty"`
}

// StarterFloor is the reputation.trust_gate.starter_floor section: a new
// agent's reliability counts as 0.25 until MinAttesters of the
// TrustedAttesters (principal IDs) have attested it positively.
type StarterFloor struct {
	TrustedAttesters []string `json:"trusted_attesters"`
	MinAttesters     int      `json:"min_attesters"`
}

// LogConfig is the log section.
type LogConfig struct {
	// File is the log file, resolved like the other paths; "" means stderr.
	File string
	// Level is debug, info, warn or error.
	Level string
}

// Rule maps the tools, resource URIs or prompts its Match fits to a
// capability and a cost.
type Rule struct {
	// Match is an exact name or URI, or a glob (* ** ? [abc] [a-z] {a,b},
	// \ escapes; in the resource map * ? and classes do not match '/').
	Match     string
	Namespace string
	Action    string
	Resource  Resource
	// Cost in microcents; nil means the policy's DefaultCost.
	Cost *int64
	// MaxCost caps the cost an upstream may report for a call when the
	// policy honours reported costs; nil means the cost itself.
	MaxCost *int64
	// Rate limits the calls the rule decides, together, at each
	// delegation of a token's chain; the zero Rate sets none.
	Rate Rate
	// Approval says which of the rule's calls wait for a person's approval.
	Approval Approval
	// Line is where the rule starts in the policy file.
	Line int

	glob *regexp.Regexp
	// prefix is what every name glob matches begins with.
	prefix string
}

// Resource says where a call's resource comes from: the literal Value, or,
// when Arg is set, Prefix followed by the string that the JSON pointer Arg
// finds in the call's arguments.
type Resource struct {
	Value  string
	Arg    string
	Prefix string

	tokens []string
}

// String writes the resource for people: the literal, or the prefix
// followed by ${POINTER}, e.g. /srv${/path}.
func (r Resource) String() string {
	if r.Arg == "" {
		return r.Value
	}
	return r.Prefix + "${" + r.Arg + "}"
}

// Log levels.
var logLevels = []string{"debug", "info", "warn", "error"}

// Default is the policy the proxy runs with when it has no policy file: no
// roots, no rules (every tool needs mcp:<tool name>:*, every resource
// mcp-resource:read:<URI>, every prompt mcp-prompt:get:<name>), cost 0,
// calls without a token refused, 16 MiB frames, info logs to stderr.
func Default() *Policy {
	return &Policy{MaxFrameBytes: DefaultMaxFrameBytes, Log: LogConfig{Level: "info"}}
}

// Load reads and parses a policy file. Relative paths in it are resolved
// against the file's directory. A file that cannot be read is an error from
// the os package; a file that can be read but is not a valid policy is
// Errors, each naming path and line.
func Load(path string) (*Policy, error) {
	p, _, err := load(path)
	return p, err
}

// openFile opens a policy file without waiting on what it is, and refuses
// anything but a regular file: a FIFO or a device swapped in for the file
// (a symlink retargeted) would block the read for ever, and with it a
// reload and the end of the process that waits for it.
func openFile(path string) (*os.File, error) {
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
		}
		return nil, err
	}
	return f, nil
}

// load is Load; it also returns the lines of the top-level keys.
func load(path string) (*Policy, map[string]int, error) {
	f, err := openFile(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, nil, fmt.Errorf("%s: larger than %d bytes", path, MaxFileSize)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, nil, err
	}
	p, lines, err := parse(data, dir)
	if errs, ok := err.(Errors); ok {
		for _, e := range errs {
			e.File = path
		}
	}
	return p, lines, err
}

// StatePaths are the keys of the files the gate writes as it runs: a
// relative path under one of them is resolved against the state directory
// when one is set, instead of the policy's directory. The files it only
// reads (tool_pins, proxy_key) stay beside the policy.
var StatePaths = []string{"revocation_list", "spend_store", "audit_log", "workspace", "log.file"}

// UseStateDir resolves the relative paths of StatePaths against dir
// (made absolute) instead of the policy's directory, and sets StateDir.
// Paths written absolute, and Redis URLs, are kept.
func (p *Policy) UseStateDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	p.StateDir = abs
	for _, key := range StatePaths {
		rel, ok := p.relative[key]
		if !ok {
			continue
		}
		path := filepath.Join(abs, rel)
		switch key {
		case "revocation_list":
			p.RevocationList = path
		case "spend_store":
			p.SpendStore = path
		case "audit_log":
			if strings.HasSuffix(rel, "/") {
				path += "/" // a directory of logs, one per process
			}
			p.AuditLog = path
		case "workspace":
			p.Workspace = path
		case "log.file":
			p.Log.File = path
		}
	}
	return nil
}

// NonceStore is the Redis a server that requires signatures keeps their
// nonces in, so that every server sharing it accepts a signed request once
// between them: the spend store when it is a Redis URL, else the
// revocation list when that is one. "" means the server's own memory.
func (p *Policy) NonceStore() string {
	for _, u := range []string{p.SpendStore, p.RevocationList} {
		if redisconn.IsURL(u) {
			return u
		}
	}
	return ""
}
