package policy

import "testing"

// An audit_log ending in "/" names a directory of logs, one per process:
// the slash is kept, beside the policy and under a state_dir alike; one
// without it is a file.
func TestAuditLogDirectoryKeepsItsSlash(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"audit_log: audit/\n", "/etc/d/audit/"},
		{"audit_log: audit\n", "/etc/d/audit"},
		{"audit_log: /var/log/d/\n", "/var/log/d/"},
		{"state_dir: /var/lib/d\naudit_log: audit/\n", "/var/lib/d/audit/"},
		{"state_dir: /var/lib/d\naudit_log: audit\n", "/var/lib/d/audit"},
	} {
		p, err := Parse([]byte(tc.yaml), "/etc/d")
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if p.AuditLog != tc.want {
			t.Errorf("%q: audit_log %q, want %q", tc.yaml, p.AuditLog, tc.want)
		}
	}
}
