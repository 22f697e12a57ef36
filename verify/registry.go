package verify

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
)

// CheckFunc is a check function (DelegateOS §6.2). output is the agent's
// output decoded as map[string]any, []any, string, json.Number, bool or nil
// (numbers keep every digit); it is shared by every check of one Verify
// call and must not be modified. params is the spec's checkParams exactly
// as written, nil when absent.
//
// A CheckFunc reports a failed check as a CheckResult with Passed false; it
// returns an error (a *ParamsError for bad params) when it cannot decide,
// and Verify then returns that error, never a pass. A Score, if set, must be
// in [0, 1].
type CheckFunc func(output any, params json.RawMessage) (CheckResult, error)

// Registry maps check names to check functions (§6.3). It is safe for
// concurrent use.
type Registry struct {
	mu  sync.RWMutex
	fns map[string]CheckFunc
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{fns: map[string]CheckFunc{}} }

// DefaultRegistry returns a new registry holding the seven built-in checks
// of §6.2: regex_match, json_schema, string_length, array_length,
// field_exists, exit_code and output_equals.
func DefaultRegistry() *Registry {
	r := NewRegistry()
	for name, fn := range builtins() {
		r.fns[name] = fn
	}
	return r
}

// defaultRegistry is the registry a Verifier with a nil Registry uses. It
// is never handed out, so nothing can be registered into it.
var defaultRegistry = sync.OnceValue(DefaultRegistry)

// Register adds a check function. The name must be 1–MaxCheckNameLen bytes
// of ASCII letters, digits and "_.:-". A name that is already registered is
// refused (ErrDuplicateCheck): a check is never silently replaced.
func (r *Registry) Register(name string, fn CheckFunc) error {
	if err := validCheckName(name); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("check %q: nil function", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.fns[name]; dup {
		return fmt.Errorf("%w: %q", ErrDuplicateCheck, name)
	}
	r.fns[name] = fn
	return nil
}

// Get returns the check function registered under name, or an error
// wrapping ErrUnknownCheck.
func (r *Registry) Get(name string) (CheckFunc, error) {
	r.mu.RLock()
	fn, ok := r.fns[name]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownCheck, name)
	}
	return fn, nil
}

// List returns the registered names, sorted.
func (r *Registry) List() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.fns))
	for name := range r.fns {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func validCheckName(name string) error {
	if name == "" || len(name) > MaxCheckNameLen {
		return fmt.Errorf("check name must be 1 to %d bytes", MaxCheckNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') ||
			c == '_' || c == '.' || c == ':' || c == '-'
		if !ok {
			return fmt.Errorf("check name %q: only ASCII letters, digits and _.:- are allowed", name)
		}
	}
	return nil
}
