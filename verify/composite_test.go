package verify

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// stepRegistry has checks "pass", "fail", "error" and scored ones, each
// counting its calls.
type stepRegistry struct {
	reg   *Registry
	calls map[string]*counter
}

func newStepRegistry(t *testing.T) *stepRegistry {
	t.Helper()
	s := &stepRegistry{reg: NewRegistry(), calls: map[string]*counter{}}
	add := func(name string, res CheckResult) {
		c := &counter{res: res}
		s.calls[name] = c
		if err := s.reg.Register(name, c.fn); err != nil {
			t.Fatal(err)
		}
	}
	add("pass", CheckResult{Passed: true})
	add("fail", CheckResult{Passed: false, Details: "nope"})
	add("fail_silent", CheckResult{Passed: false})
	add("pass_0.5", CheckResult{Passed: true, Score: score(0.5)})
	add("fail_0.9", CheckResult{Passed: false, Score: score(0.9)})
	add("pass_1", CheckResult{Passed: true, Score: score(1)})
	if err := s.reg.Register("error", func(any, json.RawMessage) (CheckResult, error) {
		return CheckResult{}, errors.New("boom")
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

func steps(names ...string) string {
	var parts []string
	for _, n := range names {
		parts = append(parts, checkSpec(n, ""))
	}
	return strings.Join(parts, ",")
}

func composite(mode, extra string, names ...string) string {
	return `{"method":"composite","mode":"` + mode + `"` + extra + `,"steps":[` + steps(names...) + `]}`
}

func TestCompositeModes(t *testing.T) {
	for _, c := range []struct {
		name    string
		spec    string
		passed  bool
		score   float64
		details string
	}{
		{"all_pass passes", composite("all_pass", "", "pass", "pass_1"), true, 1, ""},
		{"all_pass fails", composite("all_pass", "", "pass", "fail"), false, 0, "Step 1 failed: nope"},
		{"all_pass no details", composite("all_pass", "", "fail_silent"), false, 0, "Step 0 failed: no details"},
		{"all_pass single", composite("all_pass", "", "pass"), true, 1, ""},
		{"majority 2 of 3", composite("majority", "", "pass", "fail", "pass"), true, 2.0 / 3, "2 of 3"},
		{"majority 1 of 3", composite("majority", "", "pass", "fail", "fail"), false, 1.0 / 3, "1 of 3"},
		{"majority tie fails", composite("majority", "", "pass", "fail"), false, 0.5, "1 of 2"},
		{"majority tie of 4 fails", composite("majority", "", "pass", "pass", "fail", "fail"), false, 0.5, "2 of 4"},
		{"majority 3 of 4", composite("majority", "", "pass", "pass", "pass", "fail"), true, 0.75, "failed: 3"},
		{"majority single pass", composite("majority", "", "pass"), true, 1, ""},
		{"majority single fail", composite("majority", "", "fail"), false, 0, ""},
		{"weighted default threshold pass", composite("weighted", `,"weights":[0.7,0.3]`, "pass", "fail"), true, 0.7, "threshold 0.7"},
		{"weighted default threshold fail", composite("weighted", `,"weights":[0.6,0.4]`, "pass", "fail"), false, 0.6, ""},
		{"weighted just below threshold", composite("weighted", `,"weights":[0.699,0.301]`, "pass", "fail"), false, 0.699, ""},
		{"weighted uses scores", composite("weighted", `,"weights":[0.5,0.5]`, "pass_0.5", "fail_0.9"), true, 0.7, ""},
		{"weighted missing scores are 1 and 0", composite("weighted", `,"weights":[0.5,0.5]`, "pass", "fail_silent"), false, 0.5, ""},
		{"weighted threshold", composite("weighted", `,"weights":[0.5,0.5],"passThreshold":0.5`, "pass", "fail"), true, 0.5, "threshold 0.5"},
		{"weighted threshold 1", composite("weighted", `,"weights":[0.5,0.5],"passThreshold":1`, "pass", "pass_0.5"), false, 0.75, ""},
		{"weighted threshold 0", composite("weighted", `,"weights":[1],"passThreshold":0`, "fail"), true, 0, ""},
		{"weighted sum within tolerance, capped", composite("weighted", `,"weights":[0.5,0.5009]`, "pass", "pass"), true, 1, ""},
		{"weighted zero weight", composite("weighted", `,"weights":[1,0]`, "pass", "fail"), true, 1, ""},
		{"nested", `{"method":"composite","mode":"majority","steps":[` + composite("all_pass", "", "pass", "fail") + `,` + composite("all_pass", "", "pass") + `,` + checkSpec("pass", "") + `]}`, true, 2.0 / 3, ""},
	} {
		r := newStepRegistry(t)
		res, err := verifyJSON(t, &Verifier{Registry: r.reg}, c.spec, `null`)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if res.Passed != c.passed || scoreVal(res) != c.score || !strings.Contains(res.Details, c.details) {
			t.Errorf("%s: got %+v score %v, want passed %v score %v details ~%q", c.name, res, scoreVal(res), c.passed, c.score, c.details)
		}
	}
}

// TestAllPassShortCircuits: all_pass stops at the first failed step (the
// later steps are not run); majority and weighted run every step.
func TestAllPassShortCircuits(t *testing.T) {
	r := newStepRegistry(t)
	v := &Verifier{Registry: r.reg}
	if _, err := verifyJSON(t, v, composite("all_pass", "", "pass", "fail", "pass_1", "pass_0.5"), `1`); err != nil {
		t.Fatal(err)
	}
	if n := r.calls["pass"].calls.Load(); n != 1 {
		t.Errorf("first step ran %d times", n)
	}
	if n := r.calls["fail"].calls.Load(); n != 1 {
		t.Errorf("failing step ran %d times", n)
	}
	if n := r.calls["pass_1"].calls.Load() + r.calls["pass_0.5"].calls.Load(); n != 0 {
		t.Errorf("steps after the failure ran %d times", n)
	}
	for _, mode := range []string{`"majority"`, `"weighted","weights":[0.25,0.25,0.25,0.25]`} {
		r := newStepRegistry(t)
		spec := `{"method":"composite","mode":` + mode + `,"steps":[` + steps("fail", "fail", "pass_1", "pass_0.5") + `]}`
		if _, err := verifyJSON(t, &Verifier{Registry: r.reg}, spec, `1`); err != nil {
			t.Fatal(err)
		}
		if r.calls["pass_1"].calls.Load() != 1 || r.calls["pass_0.5"].calls.Load() != 1 {
			t.Errorf("mode %s skipped steps", mode)
		}
	}
}

// TestCompositeStepError: an error in any step is Verify's error, in every
// mode, and names the step.
func TestCompositeStepError(t *testing.T) {
	for _, spec := range []string{
		composite("all_pass", "", "pass", "error"),
		composite("majority", "", "pass", "pass", "error"),
		composite("weighted", `,"weights":[0.9,0.1]`, "pass", "error"),
	} {
		r := newStepRegistry(t)
		_, err := verifyJSON(t, &Verifier{Registry: r.reg}, spec, `1`)
		if err == nil || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "spec.steps[") {
			t.Errorf("%s: %v", spec, err)
		}
	}
}

// TestBadScoresRefused: a check returning NaN, ±Inf, a negative score or
// one above 1 is an error, wherever it sits.
func TestBadScoresRefused(t *testing.T) {
	for _, bad := range []float64{mathNaN(), mathInf(), -mathInf(), -0.1, 1.0000001} {
		reg := NewRegistry()
		if err := reg.Register("bad", func(any, json.RawMessage) (CheckResult, error) {
			return CheckResult{Passed: true, Score: score(bad)}, nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := reg.Register("ok", func(any, json.RawMessage) (CheckResult, error) {
			return CheckResult{Passed: true}, nil
		}); err != nil {
			t.Fatal(err)
		}
		for _, spec := range []string{
			checkSpec("bad", ""),
			composite("weighted", `,"weights":[0.5,0.5]`, "ok", "bad"),
			composite("majority", "", "ok", "bad", "ok"),
			`{"method":"deterministic_check","checkName":"bad","expectedResult":{"passed":true}}`,
		} {
			res, err := verifyJSON(t, &Verifier{Registry: reg}, spec, `1`)
			if !errors.Is(err, ErrBadResult) {
				t.Errorf("score %v in %s: %+v, %v", bad, spec, res, err)
			}
		}
	}
}

func TestExpectedResult(t *testing.T) {
	reg := newStepRegistry(t).reg
	for _, c := range []struct {
		name, spec string
		passed     bool
	}{
		{"expected failure matches", `{"method":"deterministic_check","checkName":"fail","expectedResult":{"passed":false,"details":"nope"}}`, true},
		{"details differ", `{"method":"deterministic_check","checkName":"fail","expectedResult":{"passed":false,"details":"other"}}`, false},
		{"details absent but present in result", `{"method":"deterministic_check","checkName":"fail","expectedResult":{"passed":false}}`, false},
		{"passed differs", `{"method":"deterministic_check","checkName":"pass","expectedResult":{"passed":false}}`, false},
		{"score absent in result", `{"method":"deterministic_check","checkName":"pass","expectedResult":{"passed":true,"score":1}}`, false},
		{"score equal", `{"method":"deterministic_check","checkName":"pass_0.5","expectedResult":{"passed":true,"score":0.5}}`, true},
		{"score equal written differently", `{"method":"deterministic_check","checkName":"pass_0.5","expectedResult":{"passed":true,"score":5e-1}}`, true},
		{"score differs", `{"method":"deterministic_check","checkName":"pass_0.5","expectedResult":{"passed":true,"score":0.6}}`, false},
		{"score present in result only", `{"method":"deterministic_check","checkName":"pass_0.5","expectedResult":{"passed":true}}`, false},
		{"built-in expected to fail", `{"method":"deterministic_check","checkName":"exit_code","checkParams":{"expected":0},"expectedResult":{"passed":false,"score":0,"details":"exitCode 1, expected 0"}}`, true},
	} {
		v := &Verifier{Registry: reg}
		if strings.Contains(c.spec, "exit_code") {
			v.Registry = nil
		}
		res, err := verifyJSON(t, v, c.spec, `{"exitCode":1}`)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if res.Passed != c.passed {
			t.Errorf("%s: %+v", c.name, res)
		}
		// The score reflects the comparison, not the check.
		if want := map[bool]float64{true: 1, false: 0}[c.passed]; scoreVal(res) != want {
			t.Errorf("%s: score %v, want %v", c.name, scoreVal(res), want)
		}
	}
}

// TestExpectedResultInWeighted: a mismatch is worth 0 in a weighted
// composite even when the check itself scored high.
func TestExpectedResultInWeighted(t *testing.T) {
	reg := newStepRegistry(t).reg
	spec := `{"method":"composite","mode":"weighted","weights":[1],"steps":[{"method":"deterministic_check","checkName":"pass_1","expectedResult":{"passed":false}}]}`
	res, err := verifyJSON(t, &Verifier{Registry: reg}, spec, `1`)
	if err != nil {
		t.Fatal(err)
	}
	if res.Passed || scoreVal(res) != 0 {
		t.Fatalf("%+v", res)
	}
}

// TestUnknownCheckBeforeRunning: an unknown check anywhere is an error
// before anything runs, even after an all_pass step that fails.
func TestUnknownCheckBeforeRunning(t *testing.T) {
	r := newStepRegistry(t)
	_, err := verifyJSON(t, &Verifier{Registry: r.reg}, composite("all_pass", "", "fail", "missing"), `1`)
	if !errors.Is(err, ErrUnknownCheck) {
		t.Fatalf("got %v", err)
	}
	if n := r.calls["fail"].calls.Load(); n != 0 {
		t.Fatalf("a check ran before the unknown name was found")
	}
	// And with the default registry.
	if _, err := verifyJSON(t, &Verifier{}, checkSpec("no_such_check", `{}`), `1`); !errors.Is(err, ErrUnknownCheck) {
		t.Fatalf("got %v", err)
	}
}

func TestVerifyOutputRefused(t *testing.T) {
	spec := mustSpec(t, `{"method":"schema_match","schema":true}`)
	for _, out := range []string{
		``, ` `, `{`, `{"a":1,"a":2}`, `[1] [2]`, "\"\xff\"", `"\ud800"`, `1e401`, `-1e999`,
		`1` + strings.Repeat("0", MaxNumberLen), strings.Repeat("[", 100) + strings.Repeat("]", 100),
		`"` + strings.Repeat("a", MaxOutputLen) + `"`,
	} {
		res, err := (&Verifier{}).Verify(context.Background(), spec, Task{}, json.RawMessage(out))
		if !errors.Is(err, ErrInvalidOutput) {
			t.Errorf("output %q: %+v, %v", truncate(out, 40), res, err)
		}
	}
	if _, err := (&Verifier{}).Verify(context.Background(), nil, Task{}, json.RawMessage(`1`)); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("nil spec: %v", err)
	}
	bad := &Spec{Method: MethodComposite, Mode: ModeAllPass}
	if _, err := (&Verifier{}).Verify(context.Background(), bad, Task{}, json.RawMessage(`1`)); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("invalid spec: %v", err)
	}
}

func TestVerifyContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := (&Verifier{}).Verify(ctx, mustSpec(t, `{"method":"schema_match","schema":true}`), Task{}, json.RawMessage(`1`))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

func TestSchemaMatch(t *testing.T) {
	spec := `{"method":"schema_match","schema":{"type":"object","required":["title"],"properties":{"title":{"type":"string","minLength":1}}}}`
	res, err := verifyJSON(t, &Verifier{}, spec, `{"title":"x"}`)
	if err != nil || !res.Passed || scoreVal(res) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	res, err = verifyJSON(t, &Verifier{}, spec, `{"title":""}`)
	if err != nil || res.Passed || scoreVal(res) != 0 || !strings.Contains(res.Details, "/title") {
		t.Fatalf("%+v %v", res, err)
	}
}

// TestDetailsBounded: Verify cuts long details at MaxDetailsLen.
func TestDetailsBounded(t *testing.T) {
	reg := NewRegistry()
	long := strings.Repeat("é", MaxDetailsLen)
	if err := reg.Register("long", func(any, json.RawMessage) (CheckResult, error) {
		return CheckResult{Passed: false, Details: long}, nil
	}); err != nil {
		t.Fatal(err)
	}
	res, err := verifyJSON(t, &Verifier{Registry: reg}, checkSpec("long", ""), `1`)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Details) > MaxDetailsLen || !strings.HasSuffix(res.Details, "…") || !strings.HasPrefix(res.Details, "éé") {
		t.Fatalf("details of %d bytes: %q...", len(res.Details), truncate(res.Details, 20))
	}
}
