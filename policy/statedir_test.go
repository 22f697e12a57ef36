package policy

import (
	"path/filepath"
	"testing"
)

// state_dir moves the files the gate writes, when named relative, out of
// the policy's directory; files it only reads, absolute paths and Redis
// URLs stay where they are.
func TestStateDir(t *testing.T) {
	const doc = `
revocation_list: revs.json
spend_store: spend.log
audit_log: audit/receipts.jsonl
workspace: ws
log: {file: proxy.log}
tool_pins: tools.lock
proxy_key: proxy.key
state_dir: /var/lib/delegateos
`
	p, err := Parse([]byte(doc), "/etc/delegateos")
	if err != nil {
		t.Fatal(err)
	}
	for got, want := range map[string]string{
		p.RevocationList: "/var/lib/delegateos/revs.json",
		p.SpendStore:     "/var/lib/delegateos/spend.log",
		p.AuditLog:       "/var/lib/delegateos/audit/receipts.jsonl",
		p.Workspace:      "/var/lib/delegateos/ws",
		p.Log.File:       "/var/lib/delegateos/proxy.log",
		p.ToolPins:       "/etc/delegateos/tools.lock",
		p.ProxyKey:       "/etc/delegateos/proxy.key",
		p.StateDir:       "/var/lib/delegateos",
	} {
		if got != want {
			t.Errorf("%s, want %s", got, want)
		}
	}
	p, err = Parse([]byte("state_dir: state\nspend_store: redis://127.0.0.1:6379/0\nrevocation_list: /abs/revs.json\naudit_log: a.jsonl\n"), "/etc/d")
	if err != nil {
		t.Fatal(err)
	}
	if p.SpendStore != "redis://127.0.0.1:6379/0" || p.RevocationList != "/abs/revs.json" || p.AuditLog != filepath.Join("/etc/d/state", "a.jsonl") {
		t.Errorf("spend %s, revocations %s, audit %s", p.SpendStore, p.RevocationList, p.AuditLog)
	}
	p, err = Parse([]byte("audit_log: a.jsonl\n"), "/etc/d")
	if err != nil || p.AuditLog != "/etc/d/a.jsonl" || p.StateDir != "" {
		t.Errorf("without state_dir: %v %s", err, p.AuditLog)
	}
}
