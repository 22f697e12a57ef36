package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// envFlagPrefix names the environment variables that give serve's flags
// (DELEGATEOS_LISTEN for --listen, DELEGATEOS_TLS_CERT for --tls-cert):
// a container or a unit is configured without rewriting its command.
const envFlagPrefix = "DELEGATEOS_"

// envFlagName is the variable of a flag: DELEGATEOS_ and the flag's name
// in capitals with - as _.
func envFlagName(flag string) string {
	return envFlagPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// flagsFromEnv sets each flag of fs not given on the command line from
// its environment variable, if set (a repeatable flag takes a
// comma-separated list), except those in skip, which read their
// variables themselves. It returns the flags it set, for the log.
func flagsFromEnv(fs *pflag.FlagSet, getenv func(string) string, skip ...string) ([]string, error) {
	var set []string
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" {
			return
		}
		for _, s := range skip {
			if f.Name == s {
				return
			}
		}
		v := getenv(envFlagName(f.Name))
		if v == "" {
			return
		}
		values := []string{v}
		if f.Value.Type() == "stringArray" {
			values = strings.Split(v, ",")
		}
		for _, one := range values {
			if e := fs.Set(f.Name, strings.TrimSpace(one)); e != nil {
				err = usagef("%s=%q: %v", envFlagName(f.Name), v, e)
				return
			}
		}
		set = append(set, fmt.Sprintf("--%s (%s)", f.Name, envFlagName(f.Name)))
	})
	return set, err
}
