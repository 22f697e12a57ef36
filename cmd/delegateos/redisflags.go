package main

import (
	"go.uber.org/zap"

	"github.com/delegateos/delegateos/internal/redisconn"
)

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
