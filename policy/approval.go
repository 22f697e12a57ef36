package policy

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"
)

// Bounds of a rule's approval timeout.
const (
	// DefaultApprovalTimeout is how long the proxy waits for a person's
	// answer when a rule's approval sets no timeout.
	DefaultApprovalTimeout = 2 * time.Minute
	// MaxApprovalTimeout bounds approval.timeout: a held call keeps its
	// budget reserved, and its slot, until the answer.
	MaxApprovalTimeout = time.Hour
)

// Approval says which of a rule's calls wait for a person's approval
// before they are forwarded. The zero Approval asks for none.
//
// In the policy file it is written
//
//	approval: required                        # every call the rule decides
//	approval: {above: 5000}                   # a call that reserves more than 5000 microcents
//	approval: {required: true, timeout: 30s}  # with a timeout (default 2m)
type Approval struct {
	// Required asks for every call the rule decides.
	Required bool
	// Above, when set, asks for a call whose reserved cost is more than
	// *Above microcents.
	Above *int64
	// Timeout bounds the wait for the answer; zero means
	// DefaultApprovalTimeout.
	Timeout time.Duration
}

// Needed reports whether a call that reserves cost microcents waits for
// approval.
func (a Approval) Needed(cost int64) bool {
	return a.Required || a.Above != nil && cost > *a.Above
}

// Wait is how long the answer is waited for.
func (a Approval) Wait() time.Duration {
	if a.Timeout > 0 {
		return a.Timeout
	}
	return DefaultApprovalTimeout
}

// approval reads a rule's approval: "required", or a mapping with
// required: true or above: COST, and optionally timeout.
func (ps *parser) approval(n *yaml.Node, key string) Approval {
	var a Approval
	const form = "must be required, or a mapping with required: true or above: COST (microcents), and optionally timeout: DURATION"
	if n.Kind == yaml.ScalarNode {
		if n.ShortTag() != "!!str" || n.Value != "required" {
			ps.errorf(n, key, "%s", form)
			return a
		}
		a.Required = true
		return a
	}
	if n.Kind != yaml.MappingNode {
		ps.errorf(n, key, "%s", form)
		return a
	}
	given := ps.mapping(n, key, []string{"required", "above", "timeout"}, func(k string, v *yaml.Node) {
		vk := key + "." + k
		switch k {
		case "required":
			ps.boolean(v, vk, &a.Required)
		case "above":
			if c, ok := ps.cost(v, vk); ok {
				a.Above = &c
			}
		case "timeout":
			s, ok := ps.str(v, vk)
			if !ok {
				return
			}
			d, err := time.ParseDuration(s)
			if err != nil || d < time.Second || d > MaxApprovalTimeout {
				ps.errorf(v, vk, "must be a duration such as 30s or 2m, from 1s to %s", MaxApprovalTimeout)
				return
			}
			a.Timeout = d
		}
	})
	switch {
	case given["required"] && given["above"]:
		ps.errorf(n, key, "give required or above, not both")
	case !given["required"] && !given["above"]:
		ps.errorf(n, key, "%s", form)
	case given["required"] && !a.Required:
		ps.errorf(n, key, "required: false asks for no approval; remove approval instead")
	}
	return a
}

// String writes the approval for people, e.g. "approval above 5000
// (timeout 30s)"; "" for none.
func (a Approval) String() string {
	var s string
	switch {
	case a.Required:
		s = "approval required"
	case a.Above != nil:
		s = fmt.Sprintf("approval above %d", *a.Above)
	default:
		return ""
	}
	return s + " (timeout " + a.Wait().String() + ")"
}
