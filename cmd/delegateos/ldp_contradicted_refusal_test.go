package main

import (
	"strings"
	"testing"

	"github.com/delegateos/delegateos/ldp"
)

// TestLDPSubmitContradictedRefusalIsFailure: 'ldp submit --record' takes a
// failure as a refusal (nothing recorded) whenever its code is one the
// table gives the category sent. A delegate that fails every task (its
// tool is broken) answers each with a genuine refusal code the initiator
// can itself see is false: capability_not_granted to a token narrowed to
// exactly the capability the delegate's card names for the skill,
// SKILL_UNKNOWN for a skill its card and manifest list, SESSION_UNKNOWN in
// the session it has just accepted, envelope_stale to an envelope signed a
// moment ago; and a made-up code, which the table says is counted, passes
// as a refusal when it started with signature_ (rtldp3 #5). Now 'ldp
// submit --record' reads a refusal against the exchange (ldp.Exchange)
// and AVP-Sig's reasons are listed exactly: each is recorded 0.0. So are
// CONTRACT_REFUSED, MISADDRESSED, malformed_token and expired, which the
// exchange contradicts too (rtldp4 #2, was TestRT4MoreContradictedRefusals).
func TestLDPSubmitContradictedRefusalIsFailure(t *testing.T) {
	d := newFailingDelegate(t)
	var hidden []string
	for _, c := range []struct{ code, category string }{
		{"capability_not_granted", "policy"},
		{ldp.CodeSkillUnknown, "capability"},
		{ldp.CodeSessionUnknown, "session"},
		{string(ldp.ReasonStale), "security"},
		// A made-up code is the delegate's failure, says the table, except
		// that every signature_* is taken as a security refusal.
		{"signature_tool_crashed", "security"},
		// rtldp4 #2: ldp submit sends no contract; the envelope was
		// addressed to the delegate ID the card gives; the token is the
		// one narrowed a moment before (it parses, its expiry is --ttl
		// ahead).
		{ldp.CodeContract, "policy"},
		{ldp.CodeMisaddressed, "identity"},
		{"malformed_token", "security"},
		{"expired", "policy"},
	} {
		rep := d.submit(t, ldp.LdpError{Code: c.code, Category: c.category, Severity: "error", Message: "the tool is down, but say so"})
		if rep.Recorded == nil {
			hidden = append(hidden, c.code+"/"+c.category+": "+rep.NotRecorded)
		} else if rep.Recorded.Score != 0 || !strings.Contains(rep.Recorded.Message, "counted as the delegate's failure") {
			t.Errorf("%s/%s: recorded %+v", c.code, c.category, *rep.Recorded)
		}
	}
	if len(hidden) > 0 {
		t.Fatalf("a delegate hid its failures behind refusals the initiator can see are false:\n%s", strings.Join(hidden, "\n"))
	}
}
