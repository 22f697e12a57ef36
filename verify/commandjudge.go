package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// CommandJudge is a Judge that runs a local command once per evaluation:
// the rendered prompt on its stdin, the model and temperature in the
// environment variables DELEGATEOS_JUDGE_MODEL and
// DELEGATEOS_JUDGE_TEMPERATURE, and its stdout read as the reply, which
// must be exactly {"score": <number in [0, 1]>, "reasoning": "..."} (see
// ParseJudgeReply). The command is run directly (argv, no shell).
//
// A command that exits non-zero, runs past Timeout or writes more than
// MaxJudgeReplyLen bytes is an error wrapping ErrJudge; it is killed when it
// runs too long or writes too much.
type CommandJudge struct {
	// Command is the program and its arguments; Command[0] is looked up in
	// PATH as exec.Command does.
	Command []string
	// Timeout bounds one run; 0 means DefaultJudgeTimeout.
	Timeout time.Duration
	// Env is the command's environment, to which the two variables above
	// are added; nil means the current process's environment.
	Env []string
	// Dir is the command's working directory; empty means the current one.
	Dir string
}

var _ Judge = (*CommandJudge)(nil)

// maxStderr bounds how much of the command's stderr an error quotes.
const maxStderr = 4 << 10

// Judge runs the command for one evaluation.
func (j *CommandJudge) Judge(ctx context.Context, req JudgeRequest) (JudgeResponse, error) {
	if len(j.Command) == 0 || j.Command[0] == "" {
		return JudgeResponse{}, fmt.Errorf("%w: no command configured", ErrJudge)
	}
	timeout := j.Timeout
	if timeout <= 0 {
		timeout = DefaultJudgeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, j.Command[0], j.Command[1:]...)
	env := j.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(env[:len(env):len(env)],
		"DELEGATEOS_JUDGE_MODEL="+req.Model,
		"DELEGATEOS_JUDGE_TEMPERATURE="+strconv.FormatFloat(req.Temperature, 'g', -1, 64))
	cmd.Dir = j.Dir
	cmd.Stdin = strings.NewReader(req.Prompt)
	stdout := &cappedBuffer{max: MaxJudgeReplyLen, overflow: cancel}
	stderr := &cappedBuffer{max: maxStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A child the command left behind that holds stdout open must not
	// keep Judge waiting once the command itself is gone.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	switch {
	case stdout.over:
		return JudgeResponse{}, fmt.Errorf("%w: %s wrote more than %d bytes", ErrJudge, j.Command[0], MaxJudgeReplyLen)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return JudgeResponse{}, fmt.Errorf("%w: %s timed out after %v", ErrJudge, j.Command[0], timeout)
	case ctx.Err() != nil:
		return JudgeResponse{}, ctx.Err()
	case err != nil:
		return JudgeResponse{}, fmt.Errorf("%w: %s: %v: %s", ErrJudge, j.Command[0], err, strings.TrimSpace(stderr.buf.String()))
	}
	return ParseJudgeReply(stdout.buf.Bytes())
}

// cappedBuffer keeps at most max bytes. Past that it keeps nothing more,
// notes the overflow, calls overflow (if set) and fails the write, which
// stops exec's copy. It has only Write (no ReadFrom, which io.Copy would
// prefer and which would grow without bound).
type cappedBuffer struct {
	buf      bytes.Buffer
	max      int
	over     bool
	overflow func()
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); len(p) > room {
		if b.overflow == nil { // stderr: keep the start, drop the rest
			b.buf.Write(p[:max(room, 0)])
			return len(p), nil
		}
		b.over = true
		b.overflow()
		return 0, errors.New("output limit exceeded")
	}
	return b.buf.Write(p)
}
