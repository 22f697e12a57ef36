package policy

import (
	"strings"
	"testing"
	"time"
)

func TestParseApproval(t *testing.T) {
	rule := func(approval string) string {
		return "tools:\n  - match: deploy\n    namespace: ops\n    action: deploy\n    cost: 700\n    approval: " + approval + "\n"
	}
	good := []struct {
		in                 string
		required           bool
		above              int64 // -1: none
		timeout            time.Duration
		needed300, needed9 bool // Needed(300), Needed(9000)
		text               string
	}{
		{"required", true, -1, 0, true, true, "approval required (timeout 2m0s)"},
		{"{required: true, timeout: 30s}", true, -1, 30 * time.Second, true, true, "approval required (timeout 30s)"},
		{"{above: 500}", false, 500, 0, false, true, "approval above 500 (timeout 2m0s)"},
		{"{above: 0, timeout: 1h}", false, 0, time.Hour, true, true, "approval above 0 (timeout 1h0m0s)"},
		{"{above: 300}", false, 300, 0, false, true, "approval above 300 (timeout 2m0s)"},
	}
	for _, g := range good {
		p, err := Parse([]byte(rule(g.in)), "/")
		if err != nil {
			t.Errorf("approval: %s: %v", g.in, err)
			continue
		}
		a := p.Tools[0].Approval
		if a.Required != g.required || (a.Above == nil) != (g.above < 0) || a.Above != nil && *a.Above != g.above || a.Timeout != g.timeout {
			t.Errorf("approval: %s = %+v", g.in, a)
		}
		if a.Needed(300) != g.needed300 || a.Needed(9000) != g.needed9 {
			t.Errorf("approval: %s: Needed(300) = %v, Needed(9000) = %v", g.in, a.Needed(300), a.Needed(9000))
		}
		if a.String() != g.text {
			t.Errorf("approval: %s: String() = %q, want %q", g.in, a.String(), g.text)
		}
	}
	var none Approval
	if none.Needed(1<<40) || none.String() != "" || none.Wait() != DefaultApprovalTimeout {
		t.Errorf("the zero Approval = %v %q %v", none.Needed(1<<40), none.String(), none.Wait())
	}
	bad := []struct{ in, want string }{
		{"yes", "must be required, or a mapping"},
		{"true", "must be required, or a mapping"},
		{"Required", "must be required, or a mapping"},
		{"[required]", "must be required, or a mapping"},
		{"{}", "must be required, or a mapping"},
		{"{timeout: 30s}", "must be required, or a mapping"},
		{"{required: false}", "required: false asks for no approval"},
		{"{required: true, above: 5}", "give required or above, not both"},
		{"{above: -1}", "must be a non-negative integer"},
		{"{above: 1.5}", "must be a non-negative integer"},
		{"{required: yes please}", "must be true or false"},
		{"{required: true, timeout: 0s}", "from 1s to 1h0m0s"},
		{"{required: true, timeout: 500ms}", "from 1s to 1h0m0s"},
		{"{required: true, timeout: 2h}", "from 1s to 1h0m0s"},
		{"{required: true, timeout: 30}", "must be a string"},
		{"{required: true, Timeout: 30s}", "Timeout"},
		{"{required: true, required: true}", "required"},
	}
	for _, b := range bad {
		_, err := Parse([]byte(rule(b.in)), "/")
		if err == nil || !strings.Contains(err.Error(), b.want) || !strings.Contains(err.Error(), "tools[0].approval") {
			t.Errorf("approval: %s: error %v, want one at tools[0].approval containing %q", b.in, err, b.want)
		}
	}
	for _, kind := range []string{"resources", "prompts"} {
		src := kind + ":\n  - match: \"x\"\n    namespace: own\n    action: get\n    approval: required\n"
		p, err := Parse([]byte(src), "/")
		if err != nil {
			t.Fatalf("%s rule with approval: %v", kind, err)
		}
		rules := p.Resources
		if kind == "prompts" {
			rules = p.Prompts
		}
		if !rules[0].Approval.Required {
			t.Errorf("%s rule: approval not read", kind)
		}
	}
}
