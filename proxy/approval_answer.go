package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/render"
	"github.com/delegateos/delegateos/internal/strictjson"
	"strings"
	"time"
)

// approvalID decodes a response id and reports whether it is under the
// proxy's approval prefix.
func (s *session) approvalID(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	id, ok := parseRequestID(raw)
	if !ok || !strings.HasPrefix(id.str, approvalIDPrefix) {
		return "", false
	}
	return id.str, true
}

// forgedApprovalID reports whether an upstream request uses an id under
// the proxy's approval prefix: the client's answer to it would be taken
// for an approval, so it is refused.
func (s *session) forgedApprovalID(raw []byte) bool {
	_, ours := s.approvalID(raw)
	return ours
}

// approvalTooLarge handles a client response over the frame limit whose
// id is under the proxy's approval prefix: the call it answers, if any, is
// refused, and nothing reaches the upstream. It reports whether the id
// was the proxy's.
func (s *session) approvalTooLarge(id []byte, msg string) bool {
	ask, ours := s.approvalID(id)
	if !ours {
		return false
	}
	hc := s.unhold(ask)
	if hc == nil {
		return true
	}
	o := &hc.outcome
	o.DecidedAt = time.Now()
	o.refused(VerdictUnavailable, gate.ApprovalUnavailable, "the client's answer to the approval request "+msg)
	s.concluded(hc.p, o)
	s.refuseHeld(hc.p, o.Denial, o.Detail, &s.clientLog, true)
	hc.p.free()
	return true
}

type approvalResult struct {
	raw     []byte
	action  string
	approve bool
}

// readApprovalAnswer reads the client's response strictly: a result with
// an action string, and for accept a content object whose approve is
// true. It returns what is wrong with it, or "".
func readApprovalAnswer(frame []byte) (approvalResult, string) {
	var r approvalResult
	if strictjson.Check(frame) != nil {
		return r, "the client's answer to the approval request could be read two ways"
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(frame, &msg) != nil {
		return r, "the client's answer to the approval request is not a JSON object"
	}
	if e, ok := msg["error"]; ok {
		var body struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(e, &body)
		return r, "the client answered the approval request with an error: " + render.Escaped(clip(body.Message, 200))
	}
	raw, ok := msg["result"]
	if !ok {
		return r, "the client's answer to the approval request has no result"
	}
	return readApprovalResult(raw)
}

// readApprovalResult reads an elicitation result: an object with an
// action string, and for accept a content object whose approve is true.
func readApprovalResult(raw []byte) (approvalResult, string) {
	var r approvalResult
	var res map[string]json.RawMessage
	if json.Unmarshal(raw, &res) != nil || res == nil {
		return r, "the client's answer to the approval request has a result that is not an object"
	}
	r.raw = raw
	if k := caseVariantOf(res, "action", "content"); k != "" {
		return r, "the client's answer to the approval request has a member " + render.Name(clip(k, 64)) + " that differs from action or content only in letter case"
	}
	if json.Unmarshal(res["action"], &r.action) != nil || r.action == "" {
		return r, "the client's answer to the approval request has no action"
	}
	if r.action == "accept" {
		var content map[string]json.RawMessage
		var approve bool
		if json.Unmarshal(res["content"], &content) == nil && json.Unmarshal(content["approve"], &approve) == nil {
			r.approve = approve && caseVariantOf(content, "approve") == ""
		}
	}
	return r, ""
}

// caseVariantOf returns a member of m whose name differs from one of
// names only in letter case, or "": readers that match names
// case-insensitively could take it for that one.
func caseVariantOf(m map[string]json.RawMessage, names ...string) string {
	for k := range m {
		for _, n := range names {
			if k != n && strings.EqualFold(k, n) {
				return k
			}
		}
	}
	return ""
}

// judge records the answer read (or what was wrong with it) in o.
func (o *ApprovalOutcome) judge(result approvalResult, bad string) {
	if bad != "" {
		o.refused(VerdictUnavailable, gate.ApprovalUnavailable, bad)
		return
	}
	sum := sha256.Sum256(result.raw)
	o.ContentHash, o.Action = hex.EncodeToString(sum[:]), result.action
	switch {
	case result.action == "accept" && result.approve:
		o.Approved, o.Verdict = true, VerdictApproved
	case result.action == "accept":
		o.refused(VerdictDeclined, gate.ApprovalDeclined, "the approval form was submitted without approve ticked")
	case result.action == "decline":
		o.refused(VerdictDeclined, gate.ApprovalDeclined, "the approval was declined")
	case result.action == "cancel":
		o.refused(VerdictCancelled, gate.ApprovalDeclined, "the approval was cancelled")
	default:
		o.refused(VerdictUnavailable, gate.ApprovalUnavailable, "the client answered the approval request with action "+render.Name(clip(result.action, 64)))
	}
}
