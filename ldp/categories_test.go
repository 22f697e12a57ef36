package ldp

import "testing"

// TestExchangeContradicts: the refusals an initiator can contradict from
// what it knows of the exchange (rtldp3 #5), and those it cannot.
func TestExchangeContradicts(t *testing.T) {
	card := &IdentityCard{Capabilities: []Capability{{Name: "summarize"}},
		Metadata: map[string]string{MetaCapabilityPrefix + "summarize": "docs:read:/reports/**"}}
	grants := func(c string) bool { return c == "docs:read:/reports/**" }
	full := &Exchange{Card: card, Skill: "summarize", LiveSession: true, SignedFresh: true, Grants: grants}
	for _, c := range []struct {
		code, category string
		x              *Exchange
		failed         bool
	}{
		{CodeSkillUnknown, CategoryCapability, full, true},
		{CodeSkillUnknown, CategoryCapability, &Exchange{Card: card, Skill: "other"}, false},
		{CodeSessionUnknown, CategorySession, full, true},
		{CodeSessionUnknown, CategorySession, &Exchange{}, false},
		{CodeTaskUnknown, CategorySession, full, true},
		{string(ReasonStale), CategorySecurity, full, true},
		{"signature_missing", CategorySecurity, full, true},
		{CodeBearerUnsigned, CategorySecurity, full, true},
		{string(ReasonStale), CategorySecurity, &Exchange{LiveSession: true}, false},
		{"capability_not_granted", CategoryPolicy, full, true},
		{"capability_not_granted", CategoryPolicy, &Exchange{Card: card, Skill: "summarize", Grants: func(string) bool { return false }}, false},
		{"budget_exceeded", CategoryPolicy, full, false},
		{"invalid_token", CategorySecurity, full, false},
		{"replay_store_busy", CategorySecurity, full, false},
		{CodeFrameInvalid, CategoryQuality, full, false},
		{CodePayloadMode, CategorySession, full, false},
		{"TOOL_ERROR", CategoryRuntime, nil, true},
		{"signature_tool_crashed", CategorySecurity, nil, true},
	} {
		failed, why := DelegatesFailureIn(LdpError{Code: c.code, Category: c.category}, c.x)
		if failed != c.failed {
			t.Errorf("%s/%s with %+v: failed %v (%s), want %v", c.code, c.category, c.x, failed, why, c.failed)
		}
	}
}
