package ldp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// PayloadMode is how task input and output are encoded (§4.1).
type PayloadMode string

// The modes of §4.1. Text and SemanticFrame are implemented; the others are
// read (a peer may list them) but never negotiated.
const (
	ModeText           PayloadMode = "text"
	ModeSemanticFrame  PayloadMode = "semantic_frame"
	ModeEmbeddingHints PayloadMode = "embedding_hints"
	ModeSemanticGraph  PayloadMode = "semantic_graph"
	ModeLatentCapsules PayloadMode = "latent_capsules"
	ModeCacheSlices    PayloadMode = "cache_slices"
)

var modeNumbers = map[PayloadMode]int{
	ModeText: 0, ModeSemanticFrame: 1, ModeEmbeddingHints: 2,
	ModeSemanticGraph: 3, ModeLatentCapsules: 4, ModeCacheSlices: 5,
}

// Number is the mode's number in §4.1, -1 for an unknown mode.
func (m PayloadMode) Number() int {
	if n, ok := modeNumbers[m]; ok {
		return n
	}
	return -1
}

// Known reports whether §4.1 defines m.
func (m PayloadMode) Known() bool { return m.Number() >= 0 }

// Implemented reports whether this package can carry tasks in m.
func (m PayloadMode) Implemented() bool { return m == ModeText || m == ModeSemanticFrame }

// DefaultPreferredModes is §5.4's default preference list.
var DefaultPreferredModes = []PayloadMode{ModeSemanticFrame, ModeText}

// checkModes refuses an unknown mode, a repeated one, and a list longer
// than MaxListLen.
func checkModes(what string, modes []PayloadMode) error {
	if len(modes) > MaxListLen {
		return fmt.Errorf("%s: %d modes, at most %d", what, len(modes), MaxListLen)
	}
	for i, m := range modes {
		if !m.Known() {
			return fmt.Errorf("%s: unknown payload mode %q", what, clip(string(m)))
		}
		if slices.Contains(modes[:i], m) {
			return fmt.Errorf("%s: payload mode %q listed twice", what, m)
		}
	}
	return nil
}

// Negotiated is the outcome of §4.2: the session's mode and the modes it
// falls back through, highest first.
type Negotiated struct {
	Mode     PayloadMode   `json:"mode"`
	Fallback []PayloadMode `json:"fallback_chain"`
}

// Negotiate selects, as §4.2 and the reference do, the first mode in the
// initiator's preference list that is implemented and that the responder
// supports, else Text; the fallback chain is the other common implemented
// modes with lower numbers, in the initiator's order. Text ends every chain
// whose mode is not Text, even when the initiator did not list it: every
// delegate must support Mode 0 (§4.1) and §4.3 falls back down to it.
func Negotiate(initiator, responder []PayloadMode) Negotiated {
	agreed := ModeText
	for _, m := range initiator {
		if m.Implemented() && slices.Contains(responder, m) {
			agreed = m
			break
		}
	}
	var chain []PayloadMode
	for _, m := range initiator {
		if m.Implemented() && m != agreed && slices.Contains(responder, m) &&
			m.Number() < agreed.Number() && !slices.Contains(chain, m) {
			chain = append(chain, m)
		}
	}
	if agreed != ModeText && !slices.Contains(chain, ModeText) {
		chain = append(chain, ModeText)
	}
	return Negotiated{Mode: agreed, Fallback: chain}
}

// ErrNoFallback is returned by FallBack when the session already runs in
// its last mode.
var ErrNoFallback = fmt.Errorf("no payload mode left to fall back to")

// FallBack moves n to the next mode of its chain (§4.3) and returns it.
func (n *Negotiated) FallBack() (PayloadMode, error) {
	if len(n.Fallback) == 0 {
		return n.Mode, ErrNoFallback
	}
	n.Mode, n.Fallback = n.Fallback[0], slices.Clone(n.Fallback[1:])
	return n.Mode, nil
}

// Allows reports whether a task may be carried in m: the session's mode,
// one of its fallback modes, or Text, which every delegate takes.
func (n Negotiated) Allows(m PayloadMode) bool {
	return m == n.Mode || m == ModeText || slices.Contains(n.Fallback, m)
}

// SemanticFrame is the §4.4 frame. Other members are allowed and kept in
// the input as sent.
type SemanticFrame struct {
	TaskType    string `json:"task_type"`
	Instruction string `json:"instruction"`
}

// FrameError is a semantic frame that fails §4.4: the TASK_FAILED that
// makes an initiator fall back (§4.3).
type FrameError struct{ Detail string }

func (e *FrameError) Error() string { return "semantic_frame validation failed: " + e.Detail }

// ValidateInput checks a task's input for its payload mode. A semantic
// frame must be a JSON object whose task_type and instruction are
// non-empty strings (§4.4); a failure is a *FrameError. Text takes any JSON
// value, as the reference SDKs send objects in text mode too.
func ValidateInput(mode PayloadMode, input json.RawMessage) error {
	if len(bytes.TrimSpace(input)) == 0 {
		return fmt.Errorf("task input is missing")
	}
	switch mode {
	case ModeText:
		return nil
	case ModeSemanticFrame:
		var members map[string]json.RawMessage
		if err := json.Unmarshal(input, &members); err != nil || members == nil {
			return &FrameError{Detail: "input is not a JSON object"}
		}
		for _, name := range []string{"task_type", "instruction"} {
			raw, ok := members[name]
			if !ok {
				return &FrameError{Detail: fmt.Sprintf("required field %s is missing", name)}
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil || s == "" {
				return &FrameError{Detail: fmt.Sprintf("required field %s is not a non-empty string", name)}
			}
		}
		return nil
	}
	return fmt.Errorf("payload mode %q is not implemented", clip(string(mode)))
}
