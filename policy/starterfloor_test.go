package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestParseStarterFloor(t *testing.T) {
	p := mustParse(t, `reputation:
  trust_gate:
    min_reliability: 0.5
    starter_floor:
      trusted_attesters:
        - did:key:z6Mkon3Necd6NkkyfoGoHxid2znGc59LU3K7mubaRcFbLfLX
        - gTl3Dqh9F19Wo1Rmw0x-zMuNipG07jeiXfYPW4_Js5Q
      min_attesters: 2
`)
	f := p.Reputation.TrustGate.StarterFloor
	if f == nil || f.MinAttesters != 2 || len(f.TrustedAttesters) != 2 || f.TrustedAttesters[1] != "gTl3Dqh9F19Wo1Rmw0x-zMuNipG07jeiXfYPW4_Js5Q" ||
		strings.HasPrefix(f.TrustedAttesters[0], "did:") {
		t.Fatalf("StarterFloor = %+v", f)
	}
	if p := mustParse(t, "reputation: {trust_gate: {min_reliability: 0.5, starter_floor: {trusted_attesters: []}}}\n"); p.Reputation.TrustGate.StarterFloor.MinAttesters != 3 {
		t.Errorf("min_attesters default = %d", p.Reputation.TrustGate.StarterFloor.MinAttesters)
	}
	for src, want := range map[string]string{
		"reputation: {trust_gate: {min_reliability: 0.5, starter_floor: true}}\n":                                      "starter_floor: must be a mapping",
		"reputation: {trust_gate: {min_reliability: 0.5, starter_floor: {}}}\n":                                        "trusted_attesters is required",
		"reputation: {trust_gate: {min_reliability: 0.5, starter_floor: {trusted_attesters: [x]}}}\n":                  "trusted_attesters[0]: not a principal ID or did:key",
		"reputation: {trust_gate: {min_reliability: 0.5, starter_floor: {trusted_attesters: [], min_attesters: 0}}}\n": "min_attesters: must be an integer from 1",
		"reputation: {trust_gate: {min_reliability: 0.5, starter_floor: {trusted_attesters: [], min_atesters: 2}}}\n":  "min_atesters: unknown key",
		"reputation: {trust_gate: {min_reliability: 0.5, starter_floor: {trusted_attesters: did:key:z6Mkon3Necd6}}}\n": "must be a list",
	} {
		_, err := Parse([]byte(src), "/etc/dos")
		var errs Errors
		if !errors.As(err, &errs) || len(errs) == 0 || !strings.Contains(errs[0].Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", src, err, want)
		}
	}
}
