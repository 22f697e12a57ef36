package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// LDPConfig is the policy's ldp section: serve answers as an LDP delegate
// (docs/ldp.md) with this identity, and runs each skill as a call of an
// upstream tool, decided by the gate like any MCP request.
type LDPConfig struct {
	DelegateID, Name, Description, ModelFamily, ModelVersion string
	ContextWindow                                            int64
	// WeightsFingerprint, ReasoningProfile, CostProfile (low, medium or
	// high), LatencyProfile and Jurisdiction are the identity card's
	// optional members (LDP §2.1), given to the agent card as its ldp.*
	// labels too (§9.1); empty when not set.
	WeightsFingerprint, ReasoningProfile, CostProfile, LatencyProfile, Jurisdiction string
	TrustDomain                                                                     LDPTrustDomain
	// PayloadModes are the modes offered, best first; they include text.
	PayloadModes []string
	// HMACSecret, when set, lets peers that sign with the reference's
	// hmac-sha256 use the delegate; HMACSecretFile names a file holding it
	// instead (read by serve at start), so the policy need not.
	HMACSecret, HMACSecretFile string
	// RequireEd25519 refuses HMAC envelopes even with a secret.
	RequireEd25519 bool
	// Approvers are the principal IDs (normalized) whose signed answer
	// approves or declines an LDP task a policy rule holds for approval
	// (delegateos ldp approve); none means such tasks are refused. The
	// task's own initiator never approves its task.
	Approvers []string
	Skills    []LDPSkill
}

// LDPTrustDomain is the delegate's trust domain (LDP §7).
type LDPTrustDomain struct {
	Name             string
	AllowCrossDomain bool
	TrustedPeers     []string
}

// LDPSkill maps an LDP skill to the upstream tool that performs it.
type LDPSkill struct {
	Name, Tool string
	// Arguments are fixed arguments of the tool (a JSON object), nil when
	// none.
	Arguments json.RawMessage
	// InputArgument, when set, is the argument the task's input goes in:
	// a text input as it is, a semantic frame's input member, else its
	// instruction. Without it (and without Arguments), the task's input
	// must be an object and is the tool's arguments.
	InputArgument string
	// Contract, when set, is a DelegateOS task contract file whose
	// verification runs on every result of the skill: a result is
	// verified only when it passes, and refused when it fails.
	Contract string
}

var ldpKeys = []string{"delegate_id", "name", "description", "model_family", "model_version", "context_window",
	"weights_fingerprint", "reasoning_profile", "cost_profile", "latency_profile", "jurisdiction", "trust_domain", "payload_modes", "hmac_secret", "hmac_secret_file", "require_ed25519", "approvers", "skills"}

func (ps *parser) ldp(n *yaml.Node, key string, out **LDPConfig) {
	if n.Kind != yaml.MappingNode {
		ps.errorf(n, key, "must be a mapping (%s)", strings.Join(ldpKeys, ", "))
		return
	}
	c := &LDPConfig{PayloadModes: []string{"semantic_frame", "text"}}
	given := ps.mapping(n, key, ldpKeys, func(k string, v *yaml.Node) {
		vk := key + "." + k
		switch k {
		case "delegate_id", "name", "description", "model_family", "model_version", "hmac_secret",
			"weights_fingerprint", "reasoning_profile", "cost_profile", "latency_profile", "jurisdiction":
			s, ok := ps.str(v, vk)
			if !ok {
				return
			}
			if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '|' }) || len(s) > 256 {
				ps.errorf(v, vk, "must be at most 256 characters without control characters or '|'")
				return
			}
			switch k {
			case "delegate_id":
				if !strings.HasPrefix(s, "ldp:delegate:") || len(s) == len("ldp:delegate:") {
					ps.errorf(v, vk, "must be ldp:delegate:<name>")
					return
				}
				c.DelegateID = s
			case "name":
				c.Name = s
			case "description":
				c.Description = s
			case "model_family":
				c.ModelFamily = s
			case "model_version":
				c.ModelVersion = s
			case "weights_fingerprint":
				c.WeightsFingerprint = s
			case "reasoning_profile":
				c.ReasoningProfile = s
			case "cost_profile":
				if s != "low" && s != "medium" && s != "high" {
					ps.errorf(v, vk, "must be low, medium or high")
					return
				}
				c.CostProfile = s
			case "latency_profile":
				c.LatencyProfile = s
			case "jurisdiction":
				c.Jurisdiction = s
			case "hmac_secret":
				if len(s) < 16 {
					ps.errorf(v, vk, "must be at least 16 characters")
					return
				}
				c.HMACSecret = s
			}
		case "context_window":
			if w, ok := ps.integer(v, vk, 1, 1<<40, "must be a positive integer (tokens)"); ok {
				c.ContextWindow = w
			}
		case "require_ed25519":
			ps.boolean(v, vk, &c.RequireEd25519)
		case "approvers":
			c.Approvers = ps.roots(v, vk)
		case "hmac_secret_file":
			ps.path(v, vk, &c.HMACSecretFile)
		case "trust_domain":
			ps.ldpTrust(v, vk, &c.TrustDomain)
		case "payload_modes":
			c.PayloadModes = nil
			for i, item := range ps.seq(v, vk, "payload modes (semantic_frame, text)") {
				s, ok := ps.str(item, fmt.Sprintf("%s[%d]", vk, i))
				if !ok {
					return
				}
				if s != "text" && s != "semantic_frame" {
					ps.errorf(item, vk, "%q is not a mode delegateos implements (semantic_frame, text)", s)
					return
				}
				if slices.Contains(c.PayloadModes, s) {
					ps.errorf(item, vk, "%s is listed twice", s)
					return
				}
				c.PayloadModes = append(c.PayloadModes, s)
			}
			if !slices.Contains(c.PayloadModes, "text") {
				ps.errorf(v, vk, "must include text: every LDP delegate supports it (§4.1)")
			}
		case "skills":
			c.Skills = ps.ldpSkills(v, vk)
		}
	})
	if given["hmac_secret"] && given["hmac_secret_file"] {
		ps.errorf(n, key, "give hmac_secret or hmac_secret_file, not both")
	}
	for _, req := range []string{"delegate_id", "name", "model_family", "model_version", "context_window", "trust_domain", "skills"} {
		if !given[req] {
			ps.errorf(n, key, "needs %s", req)
		}
	}
	*out = c
}

func (ps *parser) ldpTrust(n *yaml.Node, key string, out *LDPTrustDomain) {
	if n.Kind != yaml.MappingNode {
		ps.errorf(n, key, "must be a mapping with name, allow_cross_domain and trusted_peers")
		return
	}
	given := ps.mapping(n, key, []string{"name", "allow_cross_domain", "trusted_peers"}, func(k string, v *yaml.Node) {
		vk := key + "." + k
		switch k {
		case "name":
			if s, ok := ps.str(v, vk); ok && s != "" && !strings.ContainsAny(s, "|\n\r\t") {
				out.Name = s
			} else if ok {
				ps.errorf(v, vk, "must be a non-empty name")
			}
		case "allow_cross_domain":
			ps.boolean(v, vk, &out.AllowCrossDomain)
		case "trusted_peers":
			for i, item := range ps.seq(v, vk, "trust domain names") {
				if s, ok := ps.str(item, fmt.Sprintf("%s[%d]", vk, i)); ok && s != "" {
					out.TrustedPeers = append(out.TrustedPeers, s)
				}
			}
		}
	})
	if !given["name"] {
		ps.errorf(n, key, "needs name")
	}
}

func (ps *parser) ldpSkills(n *yaml.Node, key string) []LDPSkill {
	var skills []LDPSkill
	for i, item := range ps.seq(n, key, "skills ({name, tool, arguments, input_argument})") {
		ik := fmt.Sprintf("%s[%d]", key, i)
		if item.Kind != yaml.MappingNode {
			ps.errorf(item, ik, "must be a mapping with name and tool")
			continue
		}
		var s LDPSkill
		given := ps.mapping(item, ik, []string{"name", "tool", "arguments", "input_argument", "contract"}, func(k string, v *yaml.Node) {
			vk := ik + "." + k
			switch k {
			case "contract":
				ps.path(v, vk, &s.Contract)
			case "name", "tool", "input_argument":
				str, ok := ps.str(v, vk)
				if !ok {
					return
				}
				if str == "" || strings.ContainsFunc(str, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '|' }) {
					ps.errorf(v, vk, "must be a non-empty name without control characters or '|'")
					return
				}
				switch k {
				case "name":
					s.Name = str
				case "tool":
					s.Tool = str
				default:
					s.InputArgument = str
				}
			case "arguments":
				if v.Kind != yaml.MappingNode {
					ps.errorf(v, vk, "must be a mapping of the tool's fixed arguments")
					return
				}
				var m map[string]any
				if err := v.Decode(&m); err != nil {
					ps.errorf(v, vk, "%v", err)
					return
				}
				b, err := json.Marshal(m)
				if err != nil {
					ps.errorf(v, vk, "cannot be written as JSON: %v", err)
					return
				}
				s.Arguments = b
			}
		})
		if !given["name"] || !given["tool"] {
			ps.errorf(item, ik, "needs name and tool")
			continue
		}
		if slices.ContainsFunc(skills, func(o LDPSkill) bool { return o.Name == s.Name }) {
			ps.errorf(item, ik, "skill %s is listed twice", s.Name)
			continue
		}
		skills = append(skills, s)
	}
	if n.Kind == yaml.SequenceNode && len(skills) == 0 && len(n.Content) == 0 {
		ps.errorf(n, key, "must list at least one skill")
	}
	return skills
}

// Skill returns the skill named name, nil if none.
func (c *LDPConfig) Skill(name string) *LDPSkill {
	for i := range c.Skills {
		if c.Skills[i].Name == name {
			return &c.Skills[i]
		}
	}
	return nil
}
