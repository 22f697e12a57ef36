package reputation

import (
	"encoding/json"
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
	// PeerAttesters are the distinct attesters of the agent's positive
	// AVP attestations (see PeerAttestation), known or not.
	PeerAttesters []string `json:"peerAttesters,omitempty"`
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
	v.PeerAttesters = lp.attesters
	if lp.attesters == nil && lp.p.Signals != nil {
		v.PeerAttesters = positiveAttesters(lp.p)
	}
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
	// StarterFloor, when set, applies AVP's starter floor to new agents.
	StarterFloor *StarterFloor
}

// StarterFloor is AVP's starter floor as a trust-gate option: an agent's
// reliability is shown, and judged, as StarterFloorScore until enough
// trusted attesters have attested it positively. Trusted attesters are
// the ones listed: a signature proves who attested, not that the attester
// deserves trust, and anyone can make keys. The floor never raises a
// score: an agent known, with enough confidence, to be less reliable is
// judged by its own score.
type StarterFloor struct {
	// TrustedAttesters are the did:key of the attesters that count.
	TrustedAttesters []string
	// MinAttesters is how many distinct trusted attesters lift the floor;
	// 0 means DefaultFloorAttesters.
	MinAttesters int
}

// AVP's starter floor.
const (
	StarterFloorScore     = 0.25
	DefaultFloorAttesters = 3
)

// TrustReport is a trust gate's decision about an agent and what it rests
// on.
type TrustReport struct {
	TrustView
	// Score is the reliability the gate judged: the agent's, or the
	// starter floor's when FloorApplied. JSON omits it when there is
	// neither (an unknown agent).
	Score float64 `json:"score"`
	// FloorApplied is true when the starter floor set Score.
	FloorApplied bool `json:"floor_applied"`
	// TrustedAttesters are the trusted attesters that attested the agent
	// (with a starter floor only).
	TrustedAttesters []string `json:"trustedAttesters,omitempty"`
	// MinAttesters is how many lift the floor (with a starter floor only).
	MinAttesters int    `json:"minAttesters,omitempty"`
	Allowed      bool   `json:"allowed"`
	Reason       string `json:"reason"`
}

// MarshalJSON writes the view's fields (as TrustView writes them) and the
// report's beside them.
func (r TrustReport) MarshalJSON() ([]byte, error) {
	view, err := json.Marshal(r.TrustView)
	if err != nil {
		return nil, err
	}
	type own struct {
		Score            *float64 `json:"score,omitempty"`
		FloorApplied     bool     `json:"floor_applied"`
		TrustedAttesters []string `json:"trustedAttesters,omitempty"`
		MinAttesters     int      `json:"minAttesters,omitempty"`
		Allowed          bool     `json:"allowed"`
		Reason           string   `json:"reason"`
	}
	var score *float64
	if r.Known || r.FloorApplied {
		score = &r.Score
	}
	rest, err := json.Marshal(own{score, r.FloorApplied, r.TrustedAttesters, r.MinAttesters, r.Allowed, r.Reason})
	if err != nil {
		return nil, err
	}
	// Both are objects with distinct keys: join them.
	return append(append(view[:len(view)-1:len(view)-1], ','), rest[1:]...), nil
}

// Allow decides whether v's agent may be delegated to, and says why.
// Unknown agents are allowed unless the starter floor applies: being new
// is not being unreliable. A gate with thresholds outside [0, 1] refuses
// everyone.
func (g TrustGate) Allow(v TrustView) (bool, string) {
	r := g.Report(v)
	return r.Allowed, r.Reason
}

// Report is Allow with the figures the decision rests on.
func (g TrustGate) Report(v TrustView) TrustReport {
	r := TrustReport{TrustView: v, Score: v.Reliability}
	if !validThreshold(g.MinReliability) || !validThreshold(g.MinConfidence) {
		r.Reason = fmt.Sprintf("trust gate misconfigured: thresholds must be in [0, 1] (min reliability %v, min confidence %v)", g.MinReliability, g.MinConfidence)
		return r
	}
	if f := g.StarterFloor; f != nil {
		r.MinAttesters = f.MinAttesters
		if r.MinAttesters <= 0 {
			r.MinAttesters = DefaultFloorAttesters
		}
		trusted := map[string]bool{}
		for _, a := range f.TrustedAttesters {
			trusted[a] = true
		}
		for _, a := range v.PeerAttesters {
			if trusted[a] && !SameAgent(a, v.Agent) {
				r.TrustedAttesters = append(r.TrustedAttesters, a)
			}
		}
		if len(r.TrustedAttesters) < r.MinAttesters {
			r.FloorApplied, r.Score = true, StarterFloorScore
			why := fmt.Sprintf("starter floor: reliability counts as %.2f until %d trusted attesters have attested the agent (%d so far)", StarterFloorScore, r.MinAttesters, len(r.TrustedAttesters))
			if v.Known && v.Confidence >= g.MinConfidence && v.Reliability < StarterFloorScore {
				r.Score = v.Reliability
				why = fmt.Sprintf("starter floor: %d of %d trusted attesters so far, and the agent's own reliability %.2f (confidence %.2f) is lower still", len(r.TrustedAttesters), r.MinAttesters, v.Reliability, v.Confidence)
			}
			r.Allowed = r.Score >= g.MinReliability
			if r.Allowed {
				r.Reason = fmt.Sprintf("%s; %.2f meets the required %.2f", why, r.Score, g.MinReliability)
			} else {
				r.Reason = fmt.Sprintf("%s; %.2f is below the required %.2f", why, r.Score, g.MinReliability)
			}
			return r
		}
	}
	switch {
	case !v.Known:
		r.Allowed, r.Reason = true, "no reliability signals yet: unknown, not untrusted"
	case v.Confidence < g.MinConfidence:
		r.Allowed, r.Reason = true, fmt.Sprintf("reliability %.2f rests on %d signals (confidence %.2f, below %.2f): too little data to refuse", v.Reliability, v.SampleSize, v.Confidence, g.MinConfidence)
	case v.Reliability < g.MinReliability:
		r.Reason = fmt.Sprintf("reliability %.2f is below the required %.2f (confidence %.2f from %d signals)", v.Reliability, g.MinReliability, v.Confidence, v.SampleSize)
	default:
		r.Allowed, r.Reason = true, fmt.Sprintf("reliability %.2f meets the required %.2f (confidence %.2f from %d signals)", v.Reliability, g.MinReliability, v.Confidence, v.SampleSize)
	}
	return r
}

func validThreshold(x float64) bool { return !math.IsNaN(x) && validScore(x) }
