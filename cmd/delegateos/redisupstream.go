package main

import (
	"go.uber.org/zap"

	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/policy"
)

// checkRedisFromUpstream refuses the Redis stores of a proxy whose
// upstream runs as another user on the same machine: that user reaches
// whatever Redis the proxy reaches, and could erase spend, revocations or
// endings there, unless Redis asks for a password the user cannot read.
// A password on the command line (spendFlag, revsFlag) is readable by
// every local user (/proc/PID/cmdline), and one in the policy file by
// whoever can read the file.
func checkRedisFromUpstream(as *upstreamUser, pol *policy.Policy, policyPath, spendFlag, revsFlag string) error {
	for _, s := range []struct{ what, url, flag string }{
		{"the spend store", pol.SpendStore, spendFlag},
		{"the revocation list", pol.RevocationList, revsFlag},
		{"the ended-delegation set", pol.EndedDelegations, ""},
	} {
		if !redisconn.IsURL(s.url) {
			continue
		}
		o, err := redisconn.Options(s.url)
		if err != nil {
			continue // refused with its reason when it is opened
		}
		shown := redisconn.Redact(s.url)
		switch {
		case o.Password == "":
			return fixf("--upstream-user %s: %s %s has no password, so the upstream user could connect to it and change it (erase spend, drop revocations): make Redis require one (requirepass or an ACL user) and give it in the URL, in a policy file only the proxy's user can read", as.name, s.what, shown)
		case s.flag != "":
			return fixf("--upstream-user %s: the password of %s %s is on the command line, where every local user can read it (ps, /proc/PID/cmdline), the upstream user included: give the URL in a policy file only the proxy's user can read", as.name, s.what, shown)
		case policyPath != "" && as.mayAccess(policyPath, 4):
			return fixf("--upstream-user %s: the upstream user can read the policy file %s, which holds the password of %s %s: make it readable by the proxy's user only (chmod 600)", as.name, policyPath, s.what, shown)
		}
	}
	return nil
}

// warnRedisPasswordFlags warns of a Redis password given in a flag
// (name=value pairs), where every local user can read it.
func warnRedisPasswordFlags(log *zap.Logger, flags ...string) {
	for i := 0; i+1 < len(flags); i += 2 {
		if !redisconn.IsURL(flags[i+1]) {
			continue
		}
		if o, err := redisconn.Options(flags[i+1]); err == nil && o.Password != "" {
			log.Warn("a Redis password was given on the command line, where every local user can read it (ps, /proc/PID/cmdline); give the URL in a policy file only this user can read instead",
				zap.String("flag", flags[i]), zap.String("store", redisconn.Redact(flags[i+1])))
		}
	}
}
