package proxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/policy"
)

// A call held for approval when the audit log fails is not forwarded when
// the approval comes: nothing may reach the upstream without its
// receipt, and the gate's check of the log was made before the person
// was asked.
// Found by the red team of the stdio relay (was TestRedteamStdioApprovedAfterEvidenceFailed).
func TestApprovalAfterEvidenceFailedNotForwarded(t *testing.T) {
	var toClient, toServer bytes.Buffer
	s := testSession(t, zap.NewNop(), &toClient, &toServer)
	pol, err := policy.Parse([]byte("tools:\n  - {match: echo, namespace: mcp, action: echo, approval: required}\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pol.Roots = s.cfg.Gate.Policy.Roots
	s.cfg.Gate.Policy = pol
	ev := &recordingEvidence{}
	s.cfg.Evidence = ev
	s.clientFrame([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`))
	s.clientFrame([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`))
	s.toClient.flush()
	var ask struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(toClient.Bytes()), &ask); err != nil || ask.Method != MethodElicitationCreate {
		t.Fatalf("the call was not held for approval: %s", toClient.String())
	}
	toClient.Reset()
	ev.failed = true
	s.clientFrame([]byte(`{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"result":{"action":"accept","content":{"approve":true}}}`))
	s.toServer.flush()
	s.toClient.flush()
	if strings.Contains(toServer.String(), `"tools/call"`) {
		t.Fatalf("an approved call was forwarded after the audit log failed: %s", toServer.String())
	}
	if !strings.Contains(toClient.String(), `"type":"evidence_unavailable"`) {
		t.Errorf("the client got %s, want an evidence_unavailable denial", toClient.String())
	}
	for _, d := range ev.decisions {
		if d.Allowed {
			t.Errorf("a decision handed over as allowed: %+v", d)
		}
	}
}

// In observe mode a request made once the audit log has failed is refused
// all the same: observing changes what the policy decides, not that
// nothing reaches the upstream without its receipt.
func TestObserveEvidenceUnavailableRefused(t *testing.T) {
	var toClient, toServer bytes.Buffer
	s := testSession(t, zap.NewNop(), &toClient, &toServer)
	s.cfg.Observe = true
	ev := &recordingEvidence{failed: true}
	s.cfg.Evidence = ev
	s.clientFrame([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	toServer.Reset()
	s.clientFrame([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`))
	s.toServer.flush()
	s.toClient.flush()
	if strings.Contains(toServer.String(), `"tools/call"`) {
		t.Fatalf("observe mode forwarded a call the audit log cannot record: %s", toServer.String())
	}
	if !strings.Contains(toClient.String(), `"type":"evidence_unavailable"`) {
		t.Errorf("the client got %s, want an evidence_unavailable denial", toClient.String())
	}
}
