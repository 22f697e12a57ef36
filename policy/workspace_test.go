package policy

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseWorkspaceJudgeReputation(t *testing.T) {
	p := mustParse(t, `workspace: ws
judge:
  command: [./judge.sh, --strict]
  timeout: 45s
reputation:
  completeness: 0.9
  clarity: 1
  trust_gate:
    min_reliability: 0.6
    min_confidence: 0.3
`)
	if p.Workspace != "/etc/dos/ws" {
		t.Errorf("Workspace = %q", p.Workspace)
	}
	want := JudgeConfig{Command: []string{"/etc/dos/judge.sh", "--strict"}, Timeout: 45 * time.Second}
	if !reflect.DeepEqual(p.Judge, want) {
		t.Errorf("Judge = %+v, want %+v", p.Judge, want)
	}
	r := p.Reputation
	if r.Completeness == nil || *r.Completeness != 0.9 || r.Clarity == nil || *r.Clarity != 1 {
		t.Errorf("criteria = %v %v", r.Completeness, r.Clarity)
	}
	if r.TrustGate == nil || *r.TrustGate != (TrustGate{MinReliability: 0.6, MinConfidence: 0.3}) {
		t.Errorf("TrustGate = %+v", r.TrustGate)
	}
	// A bare program name is looked up on PATH, so it is not made a path.
	if p := mustParse(t, "judge: {command: [python3, j.py]}\n"); p.Judge.Command[0] != "python3" || p.Judge.Command[1] != "j.py" {
		t.Errorf("Command = %q", p.Judge.Command)
	}
	if p := mustParse(t, "reputation: {trust_gate: {min_reliability: 0.5}}\n"); p.Reputation.TrustGate.MinConfidence != 0 {
		t.Errorf("min_confidence default = %v", p.Reputation.TrustGate.MinConfidence)
	}
}

func TestParseWorkspaceJudgeReputationErrors(t *testing.T) {
	for src, want := range map[string]string{
		"workspace: [a]\n":                                  "line 1: workspace: must be a string",
		"judge: ./j.sh\n":                                   "line 1: judge: must be a mapping with command and timeout",
		"judge: {command: []}\n":                            "line 1: judge.command: must name a program",
		"judge: {command: ./j.sh}\n":                        "line 1: judge.command: must be a list of strings",
		"judge: {command: [\"\"]}\n":                        "line 1: judge.command: the program must not be empty",
		"judge: {command: [j, 5]}\n":                        "line 1: judge.command[1]: must be a string",
		"judge: {timeout: 10}\n":                            "line 1: judge.timeout: must be a string",
		"judge: {timeout: soon}\n":                          "line 1: judge.timeout: must be a duration",
		"judge: {timeout: -1s}\n":                           "line 1: judge.timeout: must be a duration",
		"judge: {timeout: 2h}\n":                            "line 1: judge.timeout: must be a duration such as 30s or 2m, at most 1h0m0s",
		"judge: {cmd: [j]}\n":                               "line 1: judge.cmd: unknown key",
		"reputation: 1\n":                                   "line 1: reputation: must be a mapping",
		"reputation: {completeness: 1.5}\n":                 "line 1: reputation.completeness: must be a number from 0 to 1",
		"reputation: {clarity: -0.1}\n":                     "line 1: reputation.clarity: must be a number from 0 to 1",
		"reputation: {clarity: .nan}\n":                     "line 1: reputation.clarity: must be a number from 0 to 1",
		"reputation: {clarity: \"0.5\"}\n":                  "line 1: reputation.clarity: must be a number from 0 to 1",
		"reputation: {trust_gate: {min_confidence: 0.2}}\n": "line 1: reputation.trust_gate: min_reliability is required",
		"reputation: {trust_gate: {min_reliability: 2}}\n":  "line 1: reputation.trust_gate.min_reliability: must be a number from 0 to 1",
		"reputation: {trust_gate: {min_reliabilty: 0.5}}\n": "line 1: reputation.trust_gate.min_reliabilty: unknown key",
		"reputation: {trust_gate: true}\n":                  "line 1: reputation.trust_gate: must be a mapping",
		"reputation: {speed: 1}\n":                          "line 1: reputation.speed: unknown key",
	} {
		_, err := Parse([]byte(src), "/etc/dos")
		var errs Errors
		if !errors.As(err, &errs) || len(errs) == 0 || !strings.Contains(errs[0].Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", src, err, want)
		}
	}
}

func TestParseSuggestsKnownKey(t *testing.T) {
	for src, want := range map[string]string{
		"tools:\n  - match: x\n    namesapce: d\n    action: a\n": "tools[0].namesapce: unknown key; did you mean namespace?",
		"spend_stor: s.log\n": "spend_stor: unknown key; did you mean spend_store?",
		"Roots: []\n":         "Roots: unknown key; did you mean roots?",
		"mystery: 1\n":        "mystery: unknown key; known keys here: roots,",
		"log: {levl: info}\n": "log.levl: unknown key; did you mean level?",
	} {
		_, err := Parse([]byte(src), "/etc/dos")
		var errs Errors
		if !errors.As(err, &errs) || !strings.Contains(lines(errs), want) {
			t.Errorf("Parse(%q) = %v, want %q", src, err, want)
		}
	}
}
