package ldp

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"sync"

	"github.com/delegateos/delegateos/identity"
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
	// CodeAttestationRefusedTask: the task was refused (by the gate, the
	// contract, the session, …) or cancelled: it did no work of this
	// delegate's to rate. Only a task that produced a TASK_RESULT, or
	// failed in this delegate's own categories (runtime, quality), is
	// attested.
	CodeAttestationRefusedTask = "ATTESTATION_TASK_REFUSED"
	// CodeAttestationRefused: the attestation is refused as self-dealing
	// (this delegate's key is among the principals of the token the task
	// ran under), or the workspace refused it.
	CodeAttestationRefused = "ATTESTATION_REFUSED"
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
	// taskRefused: the task ended in a refusal (or was cancelled), not
	// in work of this delegate's.
	taskRefused
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
	// chain holds the principals of the token each task ran under.
	chain map[[32]byte][]string
}

func taskKey(taskID string) [32]byte { return sha256.Sum256([]byte(taskID)) }

// set records taskID's state in session sid, and the principals of the
// token it ran under when chain is not nil; live says which sessions are
// still held, for the sweep that bounds the table.
func (a *attestable) set(sid, taskID string, st taskState, chain []string, max int, live func(string) bool) {
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
		t = &sessionTasks{state: map[[32]byte]taskState{}, chain: map[[32]byte][]string{}}
		a.m[sid] = t
	}
	k := taskKey(taskID)
	if old, ok := t.state[k]; ok {
		if old != taskAttested {
			t.state[k] = st
			if chain != nil {
				t.chain[k] = chain
			}
		}
		return
	}
	if len(t.order) >= MaxAttestableTasks {
		delete(t.state, t.order[0])
		delete(t.chain, t.order[0])
		t.order = t.order[1:]
	}
	t.order = append(t.order, k)
	t.state[k] = st
	if chain != nil {
		t.chain[k] = chain
	}
}

// claim marks taskID of session sid attested, if it ended in work of this
// delegate's, was not attested before, and ran under a token whose chain
// does not name self (this delegate's key, when not nil: an agent never
// earns reputation from its own delegation); release undoes it (the
// attestation was not recorded).
func (a *attestable) claim(sid, taskID string, self ed25519.PublicKey) (func(), *LdpError) {
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
	case taskRefused:
		return nil, refuse(CodeAttestationRefusedTask, "task %q was refused or cancelled, not done: only a task that produced a result or failed in this delegate's own work (runtime, quality) is attested", clip(taskID))
	}
	if self != nil {
		for _, p := range t.chain[k] {
			if pub, err := identity.ParsePrincipal(p); err == nil && pub.Equal(self) {
				return nil, refuse(CodeAttestationRefused, "self-dealing: this delegate (%s) is among the principals of the token task %q ran under; an agent never earns reputation from its own delegation",
					identity.DIDFromPublicKey(self), clip(taskID))
			}
		}
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
