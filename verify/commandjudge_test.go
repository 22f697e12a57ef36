package verify

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// script writes an executable shell script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Fatalf("the CommandJudge tests need sh: %v", err)
	}
	path := filepath.Join(t.TempDir(), "judge.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCommandJudge(t *testing.T) {
	dir := t.TempDir()
	// The judge saves its stdin and environment, then replies.
	path := script(t, `cat > "$1/prompt"
printf '%s %s' "$DELEGATEOS_JUDGE_MODEL" "$DELEGATEOS_JUDGE_TEMPERATURE" > "$1/env"
printf '{"score": 0.75, "reasoning": "fine"}\n'`)
	j := &CommandJudge{Command: []string{path, dir}}
	resp, err := j.Judge(context.Background(), JudgeRequest{Prompt: "the prompt\nline 2", Model: "m-x", Temperature: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Score != 0.75 || resp.Reasoning != "fine" {
		t.Fatalf("%+v", resp)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "prompt")); string(b) != "the prompt\nline 2" {
		t.Errorf("stdin: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "env")); string(b) != "m-x 0.25" {
		t.Errorf("env: %q", b)
	}

	// Through Verify: three runs, the median.
	v := &Verifier{Judge: j}
	res, err := verifyJSON(t, v, judgeSpec, `"out"`)
	if err != nil || !res.Passed || scoreVal(res) != 0.75 {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestCommandJudgeFailures(t *testing.T) {
	for _, c := range []struct {
		name, body string
		timeout    time.Duration
		want       error
		detail     string
	}{
		{"non-zero exit", `echo '{"score":1,"reasoning":"r"}'; echo broken >&2; exit 3`, 0, ErrJudge, "broken"},
		{"prose reply", `echo 'I think 0.9'`, 0, ErrBadJudgeReply, ""},
		{"score out of range", `echo '{"score":2,"reasoning":"r"}'`, 0, ErrBadJudgeReply, ""},
		{"empty reply", `exit 0`, 0, ErrBadJudgeReply, ""},
		{"timeout", `exec sleep 10`, 200 * time.Millisecond, ErrJudge, "timed out"},
		{"too much output", `exec yes`, 0, ErrJudge, "more than"},
		{"does not read stdin", `echo '{"score":0.5,"reasoning":"r"}'`, 0, nil, ""},
	} {
		j := &CommandJudge{Command: []string{script(t, c.body)}, Timeout: c.timeout}
		start := time.Now()
		prompt := strings.Repeat("p", 1<<20) // more than a pipe buffer
		_, err := j.Judge(context.Background(), JudgeRequest{Prompt: prompt})
		if !errors.Is(err, c.want) || (err != nil && !strings.Contains(err.Error(), c.detail)) {
			t.Errorf("%s: %v", c.name, err)
		}
		if time.Since(start) > 5*time.Second {
			t.Errorf("%s: took %v", c.name, time.Since(start))
		}
	}
	// stderr is quoted in the error, cut to a bounded length.
	_, err := (&CommandJudge{Command: []string{script(t, `head -c 1000000 /dev/zero | tr '\0' e >&2; exit 1`)}}).Judge(context.Background(), JudgeRequest{})
	if !errors.Is(err, ErrJudge) || len(err.Error()) > maxStderr+512 || !strings.Contains(err.Error(), "eeee") {
		t.Errorf("noisy failure: %d bytes: %.100s", len(err.Error()), err)
	}
	if _, err := (&CommandJudge{}).Judge(context.Background(), JudgeRequest{}); !errors.Is(err, ErrJudge) {
		t.Errorf("no command: %v", err)
	}
	if _, err := (&CommandJudge{Command: []string{filepath.Join(t.TempDir(), "missing")}}).Judge(context.Background(), JudgeRequest{}); !errors.Is(err, ErrJudge) {
		t.Errorf("missing command: %v", err)
	}
	// No shell: arguments are not interpreted.
	dir := t.TempDir()
	j := &CommandJudge{Command: []string{script(t, `printf '%s' "$1" > "$2/arg"; echo '{"score":1,"reasoning":"r"}'`), "$(touch x) ; *", dir}}
	if _, err := j.Judge(context.Background(), JudgeRequest{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "arg")); string(b) != "$(touch x) ; *" {
		t.Errorf("argument arrived as %q", b)
	}
	// A cancelled context stops the command.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	if _, err := (&CommandJudge{Command: []string{script(t, `exec sleep 10`)}}).Judge(ctx, JudgeRequest{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
