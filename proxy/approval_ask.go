package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/render"
	"github.com/delegateos/delegateos/internal/strictjson"
	"strings"
	"time"
	"unicode/utf8"
)

// MethodElicitationCreate is the request the proxy sends the client to
// ask for an approval.
const MethodElicitationCreate = "elicitation/create"

// maxArgumentsShown bounds the arguments summary in an approval request.
const maxArgumentsShown = 512

// clientCapabilities reads the initialize request's params as it passes
// to the upstream: whether the client declared the elicitation capability
// with form mode (an empty object declares form mode), and its
// clientInfo. Params that could be read two ways declare nothing.
func (s *session) clientCapabilities(params []byte) {
	elicit, answerer := readClientCapabilities(params)
	s.mu.Lock()
	s.appr.elicit, s.appr.answerer = elicit, answerer
	s.mu.Unlock()
}

func readClientCapabilities(params []byte) (elicit bool, answerer string) {
	if params == nil || strictjson.Check(params) != nil {
		return false, ""
	}
	var p struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
		ClientInfo   map[string]json.RawMessage `json:"clientInfo"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false, ""
	}
	var name, version string
	_ = json.Unmarshal(p.ClientInfo["name"], &name)
	_ = json.Unmarshal(p.ClientInfo["version"], &version)
	answerer = clip(name, 128)
	if version != "" {
		answerer += "/" + clip(version, 64)
	}
	var modes map[string]json.RawMessage
	if raw, ok := p.Capabilities["elicitation"]; !ok || json.Unmarshal(raw, &modes) != nil || modes == nil {
		return false, answerer
	}
	form, hasForm := modes["form"]
	_, hasURL := modes["url"]
	switch {
	case hasForm:
		return len(form) > 0 && form[0] == '{', answerer
	case hasURL:
		return false, answerer // URL mode only
	}
	return true, answerer
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// approvalSchema is the form the client shows: one required checkbox, so
// that submitting the form is not taken for approval unless it is ticked.
var approvalSchema = json.RawMessage(`{"type":"object","properties":{"approve":{"type":"boolean","title":"Approve this call","description":"Tick to let the call run; leave unticked, decline or cancel to refuse it.","default":false}},"required":["approve"]}`)

// approvalRequest is the elicitation/create request asking for hc's
// approval.
func approvalRequest(ask string, hc *heldCall, arguments []byte) ([]byte, error) {
	msg := struct {
		JSONRPC string `json:"jsonrpc"`
		ID      string `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", ask, MethodElicitationCreate, approvalParams(&hc.outcome, hc.p, arguments)}
	out, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// approvalParams are the params of the elicitation/create asking for an
// approval: the message names the target, a bounded summary of the
// arguments, the cost and the delegation, all made printable.
func approvalParams(o *ApprovalOutcome, p *pending, arguments []byte) map[string]any {
	var b strings.Builder
	fmt.Fprintf(&b, "delegateos: approve %s", render.Escaped(p.what()))
	if o.Capability != "" {
		fmt.Fprintf(&b, " (capability %s)", render.Escaped(o.Capability))
	}
	b.WriteString("?\n")
	if summary := argumentsSummary(arguments); summary != "" {
		fmt.Fprintf(&b, "Arguments: %s\n", summary)
	}
	fmt.Fprintf(&b, "Cost: %d microcents\n", o.Cost)
	if o.DelegationID != "" {
		fmt.Fprintf(&b, "Delegation: %s\n", render.Escaped(o.DelegationID))
	} else {
		b.WriteString("Delegation: none (unauthenticated call)\n")
	}
	fmt.Fprintf(&b, "Request SHA-256: %s\nExpires: %s", o.RequestHash, o.ExpiresAt.UTC().Format(time.RFC3339))
	return map[string]any{
		"message":         b.String(),
		"requestedSchema": approvalSchema,
		"_meta": map[string]any{"delegateos/approval": map[string]any{
			"method": o.Method, "target": o.Target, "capability": o.Capability, "costMicrocents": o.Cost,
			"delegationId": o.DelegationID, "requestSha256": o.RequestHash, "expiresAt": o.ExpiresAt.UTC().Format(time.RFC3339),
		}},
	}
}

// argumentsSummary is the arguments as compact JSON, at most
// maxArgumentsShown bytes of it, with what a terminal or chat window would
// act on escaped; "" when there are none.
func argumentsSummary(arguments []byte) string {
	if len(arguments) == 0 || string(arguments) == "null" {
		return ""
	}
	var compact bytes.Buffer
	if json.Compact(&compact, arguments) != nil {
		compact.Reset()
		compact.Write(arguments)
	}
	s := compact.String()
	more := len(s) > maxArgumentsShown
	s = render.Escaped(clip(s, maxArgumentsShown))
	if more {
		s += fmt.Sprintf(" (%d bytes in all)", compact.Len())
	}
	return s
}

// capabilityText writes what a decision's call requested.
func capabilityText(d *gate.Decision) string {
	c := d.Call
	if c.Namespace == "" {
		return ""
	}
	return c.Namespace + ":" + c.Action + ":" + c.Resource
}

// delegationOf is the delegation of a decision's token, or "".
func delegationOf(d *gate.Decision) string {
	if d.Scope == nil {
		return ""
	}
	return d.Scope.DelegationID
}

// what names a pending request's target for people.
func (p *pending) what() string {
	switch p.method {
	case gate.MethodToolsCall:
		return "tool " + render.Name(p.target)
	case gate.MethodPromptsGet:
		return "prompt " + render.Name(p.target)
	}
	return p.method + " of " + render.Name(p.target)
}
