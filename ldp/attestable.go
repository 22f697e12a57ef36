package ldp

import (
	"crypto/sha256"
	"fmt"
	"sync"
)

// Codes of an ATTESTATION refused for what it is about.
const (
	// CodeAttestationTask: the attestation names no task the sender
	// submitted in this session (or one this delegate no longer holds).
	CodeAttestationTask = "ATTESTATION_TASK_UNKNOWN"
	// CodeAttestationUnfinished: the task has not ended yet.
	CodeAttestationUnfinished = "ATTESTATION_TASK_UNFINISHED"
	// CodeAttestationRepeated: the task was attested already.
	CodeAttestationRepeated = "ATTESTATION_REPEATED"
	// CodeAttestationSubject: the attestation is about another agent
	// than this delegate, or names its task otherwise than the profile.
	CodeAttestationSubject = "ATTESTATION_SUBJECT"
)

// MaxAttestableTasks bounds the tasks of one session a Responder keeps
// for ATTESTATION (the oldest go first).
const MaxAttestableTasks = 64

// taskState is where a task of a session stands for ATTESTATION.
type taskState uint8

const (
	taskRunning taskState = iota + 1
	taskEnded
	taskAttested
)

// attestable keeps, per session, the tasks its initiator submitted and
// whether they ended or were attested: only the initiator of a task, in
// its session, may attest it, once it ended, and once.
type attestable struct {
	mu sync.Mutex
	m  map[string]*sessionTasks
}

type sessionTasks struct {
	order []([32]byte)
	state map[[32]byte]taskState
}

func taskKey(taskID string) [32]byte { return sha256.Sum256([]byte(taskID)) }

// set records taskID's state in session sid; live says which sessions
// are still held, for the sweep that bounds the table.
func (a *attestable) set(sid, taskID string, st taskState, max int, live func(string) bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]*sessionTasks{}
	}
	t := a.m[sid]
	if t == nil {
		if len(a.m) >= max {
			for id := range a.m {
				if !live(id) {
					delete(a.m, id)
				}
			}
		}
		t = &sessionTasks{state: map[[32]byte]taskState{}}
		a.m[sid] = t
	}
	k := taskKey(taskID)
	if old, ok := t.state[k]; ok {
		if old != taskAttested {
			t.state[k] = st
		}
		return
	}
	if len(t.order) >= MaxAttestableTasks {
		delete(t.state, t.order[0])
		t.order = t.order[1:]
	}
	t.order = append(t.order, k)
	t.state[k] = st
}

// claim marks taskID of session sid attested, if it ended and was not
// attested before; release undoes it (the attestation was not recorded).
func (a *attestable) claim(sid, taskID string) (func(), *LdpError) {
	refuse := func(code, format string, args ...any) *LdpError {
		return &LdpError{Code: code, Category: "policy", Severity: "error", Message: fmt.Sprintf(format, args...)}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var st taskState
	t := a.m[sid]
	k := taskKey(taskID)
	if t != nil {
		st = t.state[k]
	}
	switch st {
	case 0:
		return nil, refuse(CodeAttestationTask, "task %q was not submitted in this session by its initiator (or is older than the last %d)", clip(taskID), MaxAttestableTasks)
	case taskRunning:
		return nil, refuse(CodeAttestationUnfinished, "task %q has not ended: attest it once it has", clip(taskID))
	case taskAttested:
		return nil, refuse(CodeAttestationRepeated, "task %q was attested already: once per task", clip(taskID))
	}
	t.state[k] = taskAttested
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if t.state[k] == taskAttested {
			t.state[k] = taskEnded
		}
	}, nil
}
