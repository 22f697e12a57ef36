package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/revocation"
)

// printToken writes a new token: the bare token, or {token, format} with
// --json; to standard output, or with --out to a file only its owner can
// read (replaced whole, so a reader never sees half a token), which
// --token @FILE reads.
func printToken(e *env, out string, asJSON bool, tok *dct.Token) error {
	var b bytes.Buffer
	if asJSON {
		enc := json.NewEncoder(&b)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(tok.Serialized()); err != nil {
			return err
		}
	} else {
		b.WriteString(tok.String() + "\n")
	}
	if out == "" {
		_, err := e.stdout.Write(b.Bytes())
		return err
	}
	if err := fsutil.WriteFileAtomic(out, b.Bytes(), 0o600); err != nil {
		return inputf("--out %s: %v; give a file in a directory you can write", out, err)
	}
	return nil
}

// Mint's defaults for the common case, gating a server for one agent:
// a budget that lets through only the calls that cost nothing (every call
// of a starter policy; a priced call is refused), no further delegation,
// and a contract of its own.
const (
	defaultMintBudget   = 1
	defaultMintMaxDepth = 0
)

// newContractID returns a random contract ID, bound to no other token.
func newContractID() string {
	return "ct_" + strings.TrimPrefix(newDelegationID(), "del_")
}

var mintCmd = &command{
	name: "mint",
	args: "--key FILE --to ID --cap NS:ACTION:RESOURCE... [--contract CT] [--delegation DEL]\n" +
		"                    [--budget MICROCENTS] [--ttl DURATION | --expires TIME] [--max-depth N] [--out FILE] [--json]",
	summary: "mint a root token granting capabilities to a delegatee",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		key := fs.String("key", "", "the issuer's (root's) key file")
		to := fs.String("to", "", "the delegatee: principal ID or did:key")
		caps := fs.StringArray("cap", nil, "a capability NAMESPACE:ACTION:RESOURCE (repeatable); the resource is a path glob: * one segment, ** any number")
		contract := fs.String("contract", "", "the contract ID the token is bound to, e.g. ct_a1b2c3d4e5f6 (default: a new random ct_ ID, shared with no other token)")
		delegation := fs.String("delegation", "", "the delegation ID (default: a new random del_ ID)")
		budget := fs.Int64("budget", defaultMintBudget, "the budget in microcents (1000000 = one dollar); the default lets through only calls that cost nothing, as every call of a starter policy does")
		ttl := fs.Duration("ttl", dct.DefaultTTL, "lifetime, e.g. 30m or 2h")
		expires := fs.String("expires", "", "expiry as an RFC 3339 time, instead of --ttl")
		maxDepth := fs.Int64("max-depth", defaultMintMaxDepth, "how many times the token may be attenuated (default: never, so the delegatee cannot pass it on)")
		out := fs.String("out", "", "write the token to this file (mode 0600, replaced if it exists) instead of standard output; --token @FILE reads it")
		asJSON := fs.Bool("json", false, "print {token, format} JSON")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			var missing []string
			for _, f := range []struct {
				name  string
				given bool
			}{{"--key FILE", *key != ""}, {"--to ID", *to != ""}, {"--cap NS:ACTION:RESOURCE", len(*caps) > 0}} {
				if !f.given {
					missing = append(missing, f.name)
				}
			}
			if len(missing) > 0 {
				return fixf("missing %s; e.g. delegateos dct mint --key root.key --to AGENT_ID --cap 'mcp:*:*' --out agent.tok (the budget, lifetime, depth and contract have defaults: see --help)", strings.Join(missing, ", "))
			}
			if *contract == "" {
				*contract = newContractID()
			}
			k, err := loadKey(*key)
			if err != nil {
				return err
			}
			delegatee, err := principal("--to", *to)
			if err != nil {
				return err
			}
			cs, err := parseCaps(*caps)
			if err != nil {
				return err
			}
			now := time.Now()
			exp, err := expiry(*ttl, fs.Changed("ttl"), *expires, now)
			if err != nil {
				return err
			}
			if *delegation == "" {
				*delegation = newDelegationID()
			}
			tok, err := dct.Create(dct.CreateParams{
				Issuer: k, Delegatee: delegatee, Capabilities: cs, ContractID: *contract, DelegationID: *delegation,
				MaxChainDepth: *maxDepth, MaxBudgetMicrocents: *budget, ExpiresAt: exp, IssuedAt: now,
			})
			if err != nil {
				return usageError{msg: err.Error()}
			}
			return printToken(e, *out, *asJSON, tok)
		}
	},
}

var attenuateCmd = &command{
	name: "attenuate",
	args: "--key FILE --token TOKEN --to ID [--cap NS:ACTION:RESOURCE...] [--budget N]\n" +
		"                    [--ttl DURATION | --expires TIME] [--max-depth N] [--delegation DEL] [--contract CT] [--out FILE] [--json]",
	summary: "narrow a token and delegate it onwards (signed by its current holder)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		key := fs.String("key", "", "the current holder's key file")
		token := fs.String("token", "", "the token to attenuate; - reads standard input, @FILE reads a file")
		to := fs.String("to", "", "the new delegatee: principal ID or did:key")
		caps := fs.StringArray("cap", nil, "narrow to these capabilities (repeatable; default: keep the parent's)")
		budget := fs.Int64("budget", 0, "lower the budget, in microcents")
		ttl := fs.Duration("ttl", 0, "shorten the lifetime to this long from now")
		expires := fs.String("expires", "", "move the expiry earlier, to this RFC 3339 time")
		maxDepth := fs.Int64("max-depth", 0, "further attenuations allowed after this one (must be below the parent's)")
		delegation := fs.String("delegation", "", "the new delegation ID (default: a new random del_ ID)")
		contract := fs.String("contract", "", "the contract ID (default: the parent's)")
		out := fs.String("out", "", "write the token to this file (mode 0600, replaced if it exists) instead of standard output; --token @FILE reads it")
		asJSON := fs.Bool("json", false, "print {token, format} JSON")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			k, err := loadKey(*key)
			if err != nil {
				return err
			}
			parent, err := parseToken(e, *token)
			if err != nil {
				return err
			}
			delegatee, err := principal("--to", *to)
			if err != nil {
				return err
			}
			now := time.Now()
			p := dct.AttenuateParams{Attenuator: k, Delegatee: delegatee, DelegationID: *delegation, ContractID: *contract, Now: now}
			if p.DelegationID == "" {
				p.DelegationID = newDelegationID()
			}
			if len(*caps) > 0 {
				cs, err := parseCaps(*caps)
				if err != nil {
					return err
				}
				p.Capabilities = &cs
			}
			if fs.Changed("budget") {
				p.MaxBudgetMicrocents = budget
			}
			if fs.Changed("max-depth") {
				p.MaxChainDepth = maxDepth
			}
			if fs.Changed("ttl") || *expires != "" {
				exp, err := expiry(*ttl, fs.Changed("ttl"), *expires, now)
				if err != nil {
					return err
				}
				p.ExpiresAt = &exp
			}
			tok, err := dct.Attenuate(parent, p)
			if err != nil {
				return checkError{"refused: " + err.Error()}
			}
			return printToken(e, *out, *asJSON, tok)
		}
	},
}

var verifyCmd = &command{
	name: "verify",
	args: "--token TOKEN --root ID... --namespace NS --action A --resource R\n" +
		"                    [--spent N] [--now TIME] [--revocations FILE]",
	summary: "verify a token for a request: prints the authorized scope (exit 0) or the denial (exit 1) as JSON",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		token := fs.String("token", "", "the token; - reads standard input, @FILE reads a file")
		roots := fs.StringArray("root", nil, "a trusted root principal ID or did:key (repeatable)")
		ns := fs.String("namespace", "", "the requested namespace, e.g. docs")
		action := fs.String("action", "", "the requested action, e.g. read")
		resource := fs.String("resource", "", "the requested resource, e.g. /project/sub/notes.md")
		spent := fs.Int64("spent", 0, "microcents already spent under this delegation")
		nowFlag := fs.String("now", "", "verify as of this RFC 3339 time (default: now)")
		revs := fs.String("revocations", "", "a revocation list file to check (must exist)")
		fs.Bool("json", true, "output is always JSON")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if len(*roots) == 0 {
				return usagef("at least one --root is required")
			}
			if *ns == "" || *action == "" || *resource == "" {
				return usagef("--namespace, --action and --resource are required")
			}
			for _, r := range *roots {
				if _, err := principal("--root", r); err != nil {
					return err
				}
			}
			var now time.Time
			if *nowFlag != "" {
				t, err := parseTime("--now", *nowFlag)
				if err != nil {
					return err
				}
				now = t
			}
			opts := dct.Options{Roots: *roots, CacheSize: -1}
			if *revs != "" {
				list, err := revocation.Load(*revs)
				if err != nil {
					return inputError{err}
				}
				opts.Revocations = list
			}
			v, err := dct.NewVerifier(opts)
			if err != nil {
				return usageError{msg: err.Error()}
			}
			s, err := readToken(e, *token)
			if err != nil {
				return err
			}
			scope, err := v.Verify(s, dct.Request{Namespace: *ns, Action: *action, Resource: *resource, SpentMicrocents: *spent, Now: now})
			var d *dct.Denial
			if errors.As(err, &d) {
				if werr := writeJSON(e, d); werr != nil {
					return werr
				}
				return checkError{"denied: " + d.Error()}
			}
			if err != nil {
				return err
			}
			return writeJSON(e, scope)
		}
	},
}
