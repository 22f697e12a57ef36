package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/internal/mcpdef"
	"github.com/delegateos/delegateos/internal/mcplist"
	"github.com/delegateos/delegateos/policy"
)

// defaultLockName is the lock file pin writes next to the policy.
const defaultLockName = "tools.lock"

var pinCmd = &command{
	name:    "pin",
	args:    "[--policy FILE] [--out FILE] [--diff] [--timeout D] [--json] -- UPSTREAM_COMMAND [ARGS...]",
	summary: "approve an MCP server's tool, prompt and resource template definitions into the lock file the proxy holds it to (tool_pins), or show what changed since (--diff)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		policyPath := fs.String("policy", "", "the policy whose tool_pins names the lock file (default: "+defaultLockName+" next to the policy)")
		out := fs.String("out", "", "the lock file to write or compare with (overrides the policy; default without --policy: ./"+defaultLockName+")")
		diff := fs.Bool("diff", false, "write nothing: show each definition that differs from its pin, field by field (exit 1 if any does)")
		timeout := fs.Duration("timeout", initTimeout, "how long the server may take to start and list its definitions")
		asJSON := fs.Bool("json", false, "print the changes (and what was pinned) as JSON")
		return func(e *env, args []string) error {
			dash := fs.ArgsLenAtDash()
			if dash < 0 || len(args) == dash {
				return usagef("give the MCP server's command after --, e.g. delegateos pin --policy policy.yaml -- docserver --root /srv/docs")
			}
			if dash > 0 {
				return usagef("unexpected arguments %q before --", args[:dash])
			}
			if *timeout <= 0 {
				return usagef("--timeout must be positive")
			}
			command := args[dash:]
			lock, named, err := lockPath(*policyPath, *out)
			if err != nil {
				return err
			}
			current, err := listDefinitions(command, *timeout)
			if err != nil {
				return err
			}
			old, err := policy.LoadPins(lock)
			var problems policy.Errors
			switch {
			case errors.Is(err, iofs.ErrNotExist):
				if *diff {
					return inputf("%s does not exist: nothing is pinned to compare with; pin first with 'delegateos pin%s -- %s'", lock, pinFlags(*policyPath, *out), strings.Join(command, " "))
				}
				old = nil
			case errors.As(err, &problems) && !*diff:
				fmt.Fprintf(e.stderr, "delegateos pin: %s is not a valid lock file (%v); replacing it\n", lock, oneLine(problems.Error()))
				old = nil
			case errors.As(err, &problems):
				return inputf("%v", err)
			case err != nil:
				return inputf("%v", err)
			}
			changes := diffPins(old, current)
			report := pinReport{Lock: lock, Upstream: command, Changes: changes, Pinned: map[string]int{}}
			for _, k := range mcpdef.Kinds {
				report.Pinned[k.Section()] = current.Count(k)
			}
			if *diff {
				if *asJSON {
					if err := writeJSON(e, report); err != nil {
						return err
					}
				} else {
					writeChanges(e.stdout, changes, true)
				}
				if len(changes) > 0 {
					return checkError{fmt.Sprintf("%d of the server's definitions differ from their pins in %s", len(changes), lock)}
				}
				if !*asJSON {
					fmt.Fprintf(e.stdout, "no changes: the server lists %s, each as pinned in %s\n", counts(current), lock)
				}
				return nil
			}
			data, err := current.Marshal()
			if err != nil {
				return err
			}
			if err := fsutil.WriteFileAtomic(lock, data, 0o644); err != nil {
				return inputf("cannot write %s: %v; give a path the lock can be written to (--out)", lock, err)
			}
			report.Written = true
			if *asJSON {
				return writeJSON(e, report)
			}
			fmt.Fprintf(e.stdout, "pinned %s in %s\n", counts(current), lock)
			switch {
			case old != nil && len(changes) == 0:
				fmt.Fprintln(e.stdout, "  unchanged since the last pin")
			case old != nil:
				writeChanges(e.stdout, changes, false)
			}
			if !named {
				fmt.Fprintf(e.stdout, "the proxy holds the server to them once the policy names the lock file: tool_pins: %s\n", lockHint(*policyPath, lock))
			}
			return nil
		}
	},
}

// lockPath is the lock file pin writes or compares with, and whether the
// policy names it (so that the proxy holds the server to it).
func lockPath(policyPath, out string) (string, bool, error) {
	var pol *policy.Policy
	if policyPath != "" {
		p, err := policy.Load(policyPath)
		if err != nil {
			return "", false, policyLoadError(policyPath, err)
		}
		pol = p
	}
	switch {
	case out != "":
		abs, err := filepath.Abs(out)
		if err != nil {
			return "", false, inputf("--out %s: %v", out, err)
		}
		return out, pol != nil && pol.ToolPins == abs, nil
	case pol != nil && pol.ToolPins != "":
		return pol.ToolPins, true, nil
	case pol != nil:
		return filepath.Join(filepath.Dir(policyPath), defaultLockName), false, nil
	}
	return defaultLockName, false, nil
}

// lockHint is how the policy names the lock: relative to the policy's
// directory where it can be.
func lockHint(policyPath, lock string) string {
	if policyPath != "" {
		if rel, err := filepath.Rel(filepath.Dir(policyPath), lock); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	if abs, err := filepath.Abs(lock); err == nil {
		return abs
	}
	return lock
}

func pinFlags(policyPath, out string) string {
	var b strings.Builder
	if policyPath != "" {
		b.WriteString(" --policy " + policyPath)
	}
	if out != "" {
		b.WriteString(" --out " + out)
	}
	return b.String()
}

// listDefinitions lists the server's definitions and pins them as they are.
func listDefinitions(command []string, timeout time.Duration) (*policy.Pins, error) {
	l, err := mcplist.List(command, mcplist.Options{Timeout: timeout, ClientName: "delegateos pin", Definitions: true})
	if err != nil {
		return nil, inputError{err}
	}
	var defs []*mcpdef.Definition
	for _, k := range mcpdef.Kinds {
		for i, raw := range l.Raw[k] {
			d, err := mcpdef.Read(k, raw)
			if err != nil {
				return nil, inputf("entry %d of the server's %s cannot be pinned: %v; a client could read it otherwise than a pin would, so no pin can approve it", i+1, k.ListMethod(), err)
			}
			defs = append(defs, d)
		}
	}
	p, err := policy.NewPins(defs)
	if err != nil {
		return nil, inputError{err}
	}
	return p, nil
}

func counts(p *policy.Pins) string {
	var parts []string
	for _, k := range mcpdef.Kinds {
		n := p.Count(k)
		what := k.Plural()
		if n == 1 {
			what = k.String()
		}
		parts = append(parts, fmt.Sprintf("%d %s", n, what))
	}
	return parts[0] + ", " + parts[1] + " and " + parts[2]
}

// pinReport is what pin --json prints.
type pinReport struct {
	Lock     string         `json:"lock"`
	Upstream []string       `json:"upstream"`
	Written  bool           `json:"written"`
	Pinned   map[string]int `json:"pinned"`
	Changes  []pinChange    `json:"changes"`
}

// pinChange is one definition that differs from its pin.
type pinChange struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Change is "changed", "new" (listed, not pinned: a renamed tool is
	// new) or "gone" (pinned, not listed).
	Change string        `json:"change"`
	Fields []fieldChange `json:"fields,omitempty"`
}

// fieldChange is one field that differs; a side is null where the field
// is absent.
type fieldChange struct {
	Field  string          `json:"field"`
	Pinned json.RawMessage `json:"pinned"`
	Listed json.RawMessage `json:"listed"`
}

// diffPins lists what differs between the pins (nil: none yet, so every
// definition is new) and the listing, by kind and then name.
func diffPins(old, current *policy.Pins) []pinChange {
	changes := []pinChange{}
	for _, k := range mcpdef.Kinds {
		var oldEntries map[string]*policy.Pin
		if old != nil {
			oldEntries = old.Entries[k]
		}
		names := map[string]bool{}
		for n := range oldEntries {
			names[n] = true
		}
		for n := range current.Entries[k] {
			names[n] = true
		}
		for _, n := range slices.Sorted(maps.Keys(names)) {
			o, c := oldEntries[n], current.Entries[k][n]
			ch := pinChange{Kind: k.String(), Name: n}
			switch {
			case o == nil:
				ch.Change = "new"
				ch.Fields = fieldChanges(mcpdef.Diff(k, nil, c.Definition))
			case c == nil:
				ch.Change = "gone"
			case o.SHA256 == c.SHA256:
				continue
			default:
				ch.Change = "changed"
				if o.Definition == nil {
					// The lock holds only the digest: show what is listed.
					ch.Fields = fieldChanges(mcpdef.Diff(k, nil, c.Definition))
					for i := range ch.Fields {
						ch.Fields[i].Pinned = nil
					}
				} else {
					ch.Fields = fieldChanges(mcpdef.Diff(k, o.Definition, c.Definition))
				}
			}
			changes = append(changes, ch)
		}
	}
	return changes
}

func fieldChanges(cs []mcpdef.Change) []fieldChange {
	out := make([]fieldChange, len(cs))
	for i, c := range cs {
		out[i] = fieldChange{Field: c.Field, Pinned: c.Old, Listed: c.New}
	}
	return out
}

// writeChanges prints the changes for people: each definition, and under
// it each field that differs with its pinned and its listed value (as
// canonical JSON, with every character a terminal could act on escaped).
// Without fields, only the names.
func writeChanges(w io.Writer, changes []pinChange, fields bool) {
	for _, c := range changes {
		what := map[string]string{"changed": "changed", "new": "new, not pinned", "gone": "pinned, no longer listed"}[c.Change]
		if !fields {
			var names []string
			for _, f := range c.Fields {
				names = append(names, f.Field)
			}
			if c.Change == "changed" && len(names) > 0 {
				what += " (" + strings.Join(names, ", ") + ")"
			}
			fmt.Fprintf(w, "  %s %s: %s\n", c.Kind, showValue(quoteJSON(c.Name)), what)
			continue
		}
		fmt.Fprintf(w, "%s %s: %s\n", c.Kind, showValue(quoteJSON(c.Name)), what)
		for _, f := range c.Fields {
			fmt.Fprintf(w, "  %s\n", f.Field)
			if c.Change == "changed" {
				fmt.Fprintf(w, "    pinned: %s\n", showValue(f.Pinned))
			}
			fmt.Fprintf(w, "    listed: %s\n", showValue(f.Listed))
		}
	}
}

func quoteJSON(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// showValue writes a JSON value on one line for a terminal: canonical, with
// each character a terminal or a reader could be fooled by (controls, line
// separators, bidirectional overrides) written as a \u escape, which in a
// JSON string means the same character. "(absent)" for no value.
func showValue(v json.RawMessage) string {
	if v == nil {
		return "(absent)"
	}
	if c, err := jcs.Transform(v); err == nil {
		v = c
	}
	var b strings.Builder
	for _, r := range string(v) {
		if r < 0x20 || r >= 0x7f && r < 0xa0 || r == utf8.RuneError || r == 0x2028 || r == 0x2029 ||
			r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
