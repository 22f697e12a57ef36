package ldpfront

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/strictjson"
	"github.com/delegateos/delegateos/internal/timestamp"
)

// An LDP peer is not an MCP client a person could be asked through, and
// the peer asking must not approve its own task: a task whose call a rule
// holds for approval waits for an answer signed by one of the policy's
// ldp.approvers (delegateos ldp approve), at ApprovalsPath. The front
// asks the gate as an MCP 2026-07-28 client that takes form elicitation,
// holds the gate's input_required answer, tells the task's initiator
// (TASK_UPDATE) and the server's log the approval's ID and what it is
// for, and sends the call back with the approver's answer; the relay
// decides it afresh and writes its approval receipt, as for any client.

// ApprovalElsewhere is the reason an MCP client's call held for approval
// is refused when the policy names ldp.approvers: they answer every held
// call, and the client would approve its own (proxy.Config.
// ApprovalElsewhere of every relay session but the LDP front's).
const ApprovalElsewhere = "this server's approvals are answered by its LDP approvers (ldp.approvers, 'delegateos ldp approve'), never by the client that sends the call: send it as an LDP task to this server's delegate, where it waits for one of them"

// ApprovalsPath is where an approver answers: POST a signed Approval.
const ApprovalsPath = "/ldp/approvals"

// ApprovalIDPrefix starts every approval ID; 32 lower-case hex digits follow.
const ApprovalIDPrefix = "ldpappr_"

// maxApprovalBody bounds an approval's body.
const maxApprovalBody = 4 << 10

// maxWaiting bounds the tasks waiting for approval at once, and
// maxWaitingPerTree those of one delegation tree (ldp.Task.Tree: the
// token's root delegation, which its holders cannot multiply as they can
// keys; a tokenless peer's delegate ID): one token's holders cannot take
// every place.
const (
	maxWaiting        = 256
	maxWaitingPerTree = 16
)

// approvalWindow is how far an approval's timestamp may be from the
// server's clock.
const approvalWindow = 60 * time.Second

// Approval is an approver's answer to a waiting task: Ed25519 by the
// approver's key (its did:key) over the JCS form of every member but
// signature, as LDP envelopes are signed.
type Approval struct {
	ApprovalID string `json:"approval_id"`
	Approve    bool   `json:"approve"`
	Approver   string `json:"approver"`
	Timestamp  string `json:"timestamp"`
	Signature  string `json:"signature,omitempty"`
}

func (a *Approval) signedInput() ([]byte, error) {
	c := *a
	c.Signature = ""
	return canon.Marshal(&c)
}

// Sign sets the approver to key's did:key, the timestamp to now, and signs.
func (a *Approval) Sign(key ed25519.PrivateKey, now time.Time) error {
	a.Approver = identity.DIDFromPublicKey(key.Public().(ed25519.PublicKey))
	a.Timestamp = timestamp.Format(now)
	msg, err := a.signedInput()
	if err != nil {
		return err
	}
	a.Signature = b64.Encode(ed25519.Sign(key, msg))
	return nil
}

// verify checks the signature by the approver's key.
func (a *Approval) verify() error {
	pub, err := identity.PublicKeyFromDID(a.Approver)
	if err != nil {
		return fmt.Errorf("approver: %v", err)
	}
	sig, err := b64.Decode(a.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return errors.New("signature is not an unpadded base64url Ed25519 signature")
	}
	msg, err := a.signedInput()
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, msg, sig) {
		return errors.New("the signature does not verify")
	}
	return nil
}

// waiting is a task held for approval.
type waiting struct {
	// initiators are the principal IDs that asked for the task (its
	// envelope's signer, its token's holder): none may approve it.
	initiators []string
	// tree is the delegation tree the task's place is counted in.
	tree string
	// session is the LDP session of the task: closed, it takes its
	// waiting tasks with it.
	session string
	answer  chan Approval
}

// approvals are the tasks waiting for an approver.
type approvals struct {
	approvers []string
	mu        sync.Mutex
	m         map[string]*waiting
	now       func() time.Time
}

// add holds a task; ok is false when too many wait already.
func (a *approvals) add(session, tree string, initiators []string) (string, *waiting, bool) {
	var b [16]byte
	rand.Read(b[:])
	id := ApprovalIDPrefix + hex.EncodeToString(b[:])
	if tree == "" && len(initiators) > 0 {
		tree = "key:" + initiators[0]
	}
	w := &waiting{initiators: initiators, tree: tree, session: session, answer: make(chan Approval, 1)}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]*waiting{}
	}
	// The tree's share first: a tree at its share is refused, however
	// many places others leave.
	if tree != "" {
		n := 0
		for _, o := range a.m {
			if o.tree == tree {
				n++
			}
		}
		if n >= maxWaitingPerTree {
			return "", nil, false
		}
	}
	if len(a.m) >= maxWaiting {
		return "", nil, false
	}
	a.m[id] = w
	return id, w, true
}

func (a *approvals) remove(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, id)
}

// endSession drops the approvals of session sid's tasks: an answer to one
// of them finds nothing to approve (404).
func (a *approvals) endSession(sid string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, w := range a.m {
		if w.session == sid {
			delete(a.m, id)
		}
	}
}

// approvalError is a refused answer: its HTTP status and why.
type approvalError struct {
	status int
	msg    string
}

func (e *approvalError) Error() string { return e.msg }

// answer takes an approver's signed answer: the first valid one for a
// waiting task decides it.
func (a *approvals) answer(body []byte) (*Approval, error) {
	refuse := func(status int, format string, args ...any) (*Approval, error) {
		return nil, &approvalError{status, fmt.Sprintf(format, args...)}
	}
	var ap Approval
	if err := strictjson.Unmarshal(body, &ap); err != nil {
		return refuse(http.StatusBadRequest, "the approval is not one: %v", err)
	}
	if err := ap.verify(); err != nil {
		return refuse(http.StatusUnauthorized, "the approval's signature: %v", err)
	}
	approver, _ := identity.PrincipalIDFromDID(ap.Approver)
	listed := false
	for _, p := range a.approvers {
		if p == approver {
			listed = true
		}
	}
	if !listed {
		return refuse(http.StatusForbidden, "%s is not one of this delegate's approvers (ldp.approvers)", ap.Approver)
	}
	at, err := timestamp.Parse(ap.Timestamp)
	now := a.now()
	if err != nil || at.Before(now.Add(-approvalWindow)) || at.After(now.Add(approvalWindow)) {
		return refuse(http.StatusUnauthorized, "the approval's timestamp %q is not within %s of this server's clock", ap.Timestamp, approvalWindow)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.m[ap.ApprovalID]
	if w == nil {
		return refuse(http.StatusNotFound, "no task is waiting for approval %q (answered already, ended, or never asked)", clipID(ap.ApprovalID))
	}
	for _, p := range w.initiators {
		if p == approver {
			return refuse(http.StatusForbidden, "%s asked for this task: its initiator does not approve its own task", ap.Approver)
		}
	}
	delete(a.m, ap.ApprovalID)
	w.answer <- ap
	return &ap, nil
}

func clipID(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// serveApprovals is the handler of ApprovalsPath.
func (a *approvals) serve(readBody func(http.ResponseWriter, *http.Request) ([]byte, func(), error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reply := func(status int, v any) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(v)
		}
		if r.Method != http.MethodPost {
			reply(http.StatusMethodNotAllowed, map[string]string{"error": "POST a signed approval"})
			return
		}
		var body []byte
		var err error
		if readBody != nil {
			var release func()
			if body, release, err = readBody(w, r); err != nil {
				return // answered
			}
			defer release()
		} else if body, err = io.ReadAll(io.LimitReader(r.Body, maxApprovalBody+1)); err != nil || len(body) > maxApprovalBody {
			reply(http.StatusRequestEntityTooLarge, map[string]string{"error": "the approval is too large"})
			return
		}
		ap, err := a.answer(body)
		if err != nil {
			var ae *approvalError
			errors.As(err, &ae)
			reply(ae.status, map[string]string{"error": ae.msg})
			return
		}
		reply(http.StatusOK, map[string]any{"approval_id": ap.ApprovalID, "approved": ap.Approve, "approver": ap.Approver})
	})
}

// inputRequired reads a tools/call result that asks for the user's input
// (MCP 2026-07-28): the requestState to send back, the approval's message
// and when it expires.
func inputRequired(result json.RawMessage) (state, message string, expires time.Time, ok bool) {
	var r struct {
		ResultType    string `json:"resultType"`
		RequestState  string `json:"requestState"`
		InputRequests map[string]struct {
			Params struct {
				Message string `json:"message"`
				Meta    map[string]struct {
					ExpiresAt string `json:"expiresAt"`
				} `json:"_meta"`
			} `json:"params"`
		} `json:"inputRequests"`
	}
	if json.Unmarshal(result, &r) != nil || r.ResultType != "input_required" || r.RequestState == "" {
		return "", "", time.Time{}, false
	}
	req, ok := r.InputRequests[approvalInputKey]
	if !ok || len(r.InputRequests) != 1 {
		return "", "", time.Time{}, false
	}
	expires, _ = timestamp.Parse(req.Params.Meta[approvalInputKey].ExpiresAt)
	return r.RequestState, strings.TrimSpace(req.Params.Message), expires, true
}

// approvalInputKey names the gate's input request (proxy's).
const approvalInputKey = "delegateos/approval"

// clientMeta declares the front to the relay as an MCP 2026-07-28 client
// that takes form elicitation, so that a held call is asked for with an
// input_required result rather than refused.
var clientMeta = map[string]any{
	"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
	"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{"form": map[string]any{}}},
	"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "delegateos-ldp-approvers", "version": "1"},
}
