package main

import (
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// serveEnvFlags are the flags of serve that the environment can give, as
// DELEGATEOS_ and the flag's name in capitals with _ for - (a container's
// configuration: docker run -e DELEGATEOS_ALLOW_HOST=mcp.example.com). A
// flag on the command line wins; a list takes comma-separated values.
var serveEnvFlags = []string{
	"listen", "policy", "allow-host", "allow-origin", "tls-cert", "tls-key", "log", "revocations",
	"spend-store", "upstream-url", "upstream-headers", "endpoint", "drain-timeout", "idle-timeout", "max-sessions",
}

// flagEnvName is the environment variable of a flag.
func flagEnvName(flag string) string {
	return "DELEGATEOS_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyFlagEnv sets each of names that the command line did not give
// from its environment variable, when that is set, and returns the
// variables used, in order.
func applyFlagEnv(fs *pflag.FlagSet, names []string, getenv func(string) string) ([]string, error) {
	var used []string
	for _, name := range names {
		f := fs.Lookup(name)
		if f == nil || f.Changed {
			continue
		}
		v := getenv(flagEnvName(name))
		if v == "" {
			continue
		}
		values := []string{v}
		if strings.HasSuffix(f.Value.Type(), "Array") || strings.HasSuffix(f.Value.Type(), "Slice") {
			values = strings.Split(v, ",")
		}
		for _, x := range values {
			if err := fs.Set(name, strings.TrimSpace(x)); err != nil {
				return nil, usagef("%s=%q: %v", flagEnvName(name), v, err)
			}
		}
		used = append(used, flagEnvName(name))
	}
	sort.Strings(used)
	return used, nil
}

// noteFlagEnv adds each flag's environment variable to its help.
func noteFlagEnv(fs *pflag.FlagSet, names []string) {
	for _, name := range names {
		if f := fs.Lookup(name); f != nil {
			f.Usage += " (or $" + flagEnvName(name) + "; a list comma-separated)"
			if !strings.HasSuffix(f.Value.Type(), "Array") && !strings.HasSuffix(f.Value.Type(), "Slice") {
				f.Usage = strings.TrimSuffix(f.Usage, "; a list comma-separated)") + ")"
			}
		}
	}
}
