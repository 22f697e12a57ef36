package reputation

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// TrustView is what a trust decision needs to know about an agent.
type TrustView struct {
	// Agent is the agent's DID.
	Agent string `json:"agent"`
	// Known is false when the agent has no reliability signals: it is
	// unknown, not untrusted (§1, §4.4), and the other fields are zero.
	Known bool `json:"known"`
	// Reliability is the reliability score with decay applied.
	Reliability float64   `json:"reliability"`
	Confidence  float64   `json:"confidence"`
	SampleSize  int       `json:"sampleSize"`
	LastSignal  time.Time `json:"lastSignal"`
}

// Trust returns the agent's reliability as it reads at now (decay
// applied). An agent with no profile, or a profile without reliability
// signals, is not known; an error means the workspace could not be read,
// and a gate should deny. Parsed profiles are cached while their files are
// unchanged, so the gate does not parse a large profile on every call.
func (w *Workspace) Trust(agent string, now time.Time) (TrustView, error) {
	ref, err := parseAgent(agent)
	if err != nil {
		return TrustView{}, err
	}
	v := TrustView{Agent: ref.did}
	lp, err := w.findProfile(ref, w.cachedProfile)
	if errors.Is(err, ErrNotFound) {
		return v, nil
	}
	if err != nil {
		return TrustView{}, err
	}
	v.Agent = lp.p.AgentDID
	// The stored state with decay, never a replay: a clock behind the
	// last signal reads the score undecayed, not as unknown.
	d, ok := lp.p.Dimensions[Reliability]
	if !ok || d.SampleSize <= 0 {
		return v, nil
	}
	v.Known, v.Reliability, v.Confidence, v.SampleSize, v.LastSignal = true, Decay(d.Score, d.LastSignal, now), Confidence(d.SampleSize), d.SampleSize, d.LastSignal
	return v, nil
}

// TrustGate refuses delegation to agents that have shown themselves
// unreliable. The zero value allows everyone.
type TrustGate struct {
	// MinReliability is the lowest decayed reliability allowed.
	MinReliability float64
	// MinConfidence is the confidence at which MinReliability starts to
	// apply: below it there is too little data to refuse anyone.
	MinConfidence float64
}

// Allow decides whether v's agent may be delegated to, and says why.
// Unknown agents are allowed: being new is not being unreliable. A gate
// with thresholds outside [0, 1] refuses everyone.
func (g TrustGate) Allow(v TrustView) (bool, string) {
	if !validThreshold(g.MinReliability) || !validThreshold(g.MinConfidence) {
		return false, fmt.Sprintf("trust gate misconfigured: thresholds must be in [0, 1] (min reliability %v, min confidence %v)", g.MinReliability, g.MinConfidence)
	}
	switch {
	case !v.Known:
		return true, "no reliability signals yet: unknown, not untrusted"
	case v.Confidence < g.MinConfidence:
		return true, fmt.Sprintf("reliability %.2f rests on %d signals (confidence %.2f, below %.2f): too little data to refuse", v.Reliability, v.SampleSize, v.Confidence, g.MinConfidence)
	case v.Reliability < g.MinReliability:
		return false, fmt.Sprintf("reliability %.2f is below the required %.2f (confidence %.2f from %d signals)", v.Reliability, g.MinReliability, v.Confidence, v.SampleSize)
	}
	return true, fmt.Sprintf("reliability %.2f meets the required %.2f (confidence %.2f from %d signals)", v.Reliability, g.MinReliability, v.Confidence, v.SampleSize)
}

func validThreshold(x float64) bool { return !math.IsNaN(x) && validScore(x) }
