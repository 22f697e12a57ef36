package gate

import (
	"errors"
	"strings"
	"testing"
)

// Red team of the reload (held): a change nested in a map or a list of a
// setting that cannot change live (ldp's skills and trust domain,
// receipts, log, judge, reputation, a rule's rate in a list) is refused
// with the setting's key, and nothing of it is applied, not even the
// live changes beside it.
func TestReloadRTNestedFixedSettingsRefused(t *testing.T) {
	base := "rate: 3/1m\n" +
		"ldp:\n  delegate_id: ldp:delegate:docs\n  name: Docs delegate\n  model_family: none\n  model_version: docserver-1\n  context_window: 8192\n  payload_modes: [semantic_frame, text]\n  trust_domain: {name: research, allow_cross_domain: false, trusted_peers: []}\n  skills:\n    - {name: echo, tool: echo, input_argument: text}\n" +
		"receipts: {include_arguments: false}\n" +
		"log: {level: info}\n" +
		"judge: {command: [./judge.sh], timeout: 2m}\n" +
		"reputation: {completeness: 0.7}\n"
	f, cur, _ := reloadFixture(t, base)
	before := cur.Load()
	for _, c := range []struct{ from, to, why string }{
		{"input_argument: text", "input_argument: other", "ldp changed"},
		{"{name: echo, tool: echo", "{name: echo, tool: write_file", "ldp changed"},
		{"allow_cross_domain: false", "allow_cross_domain: true", "ldp changed"},
		{"trusted_peers: []", "trusted_peers: [evil]", "ldp changed"},
		{"include_arguments: false", "include_arguments: true", "receipts changed"},
		{"level: info", "level: debug", "log changed"},
		{"[./judge.sh]", "[./other.sh]", "judge changed"},
		{"completeness: 0.7", "completeness: 0.1", "reputation changed"},
	} {
		y := strings.Replace(base, c.from, c.to, 1)
		if y == base {
			t.Fatalf("%q not in the policy", c.from)
		}
		// A live change beside it (default_cost) must not apply either.
		_, err := cur.Reload(f.policy(t, y+"default_cost: 7\n"), Options{}, nil)
		var re *ReloadError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s -> %s: %v; want a ReloadError saying %q", c.from, c.to, err, c.why)
		}
	}
	if cur.Load() != before || cur.Load().Policy.DefaultCost == 7 {
		t.Fatal("a refused reload changed the snapshot in force")
	}
}
