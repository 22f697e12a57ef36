package gate

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/ratelimit"
)

// BenchmarkGateRate is BenchmarkGate under rate limits that never refuse
// (a million calls a millisecond), so that the difference is the rate
// check's cost per call: none; the policy's rate; the policy's and the
// tool rule's; and the policy's with its windows kept in a file, as the
// proxy keeps them next to a spend store (one append per call).
func BenchmarkGateRate(b *testing.B) {
	never := policy.Rate{N: policy.MaxRateCalls, Per: time.Millisecond}
	for _, c := range []struct {
		name       string
		rate, rule policy.Rate
		file       bool
	}{
		{name: "rate=none"},
		{name: "rate=policy", rate: never},
		{name: "rate=policy+rule", rate: never, rule: never},
		{name: "rate=policy,file", rate: never, file: true},
	} {
		b.Run(c.name, func(b *testing.B) {
			g, token := benchGate(b)
			pol := *g.Policy
			pol.Rate = c.rate
			pol.Tools = []policy.Rule{{Match: "echo", Namespace: "mcp", Action: "echo", Resource: policy.Resource{Value: "*"}, Rate: c.rule}}
			g.Policy = &pol
			if c.file {
				l, err := ratelimit.OpenFile(filepath.Join(b.TempDir(), "rates"), RateLimits(&pol), time.Now())
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				g.Rates = l
			}
			benchDecide(b, g, token)
		})
	}
}
