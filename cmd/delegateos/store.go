package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/budget"
)

var storeGroup = &command{
	name:    "store",
	summary: "move a spend store between a file and Redis",
	subs:    []*command{storeMigrateCmd},
}

var storeMigrateCmd = &command{
	name:    "migrate",
	args:    "--from FILE|URL --to FILE|URL [--json]",
	summary: "copy a spend store to a new file or an empty Redis store (redis://, rediss://), keeping every delegation's spend",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		from := fs.String("from", "", "the spend store to copy: a file (held while it is read, so no proxy may have it open) or a redis:// URL (stop its proxies first)")
		to := fs.String("to", "", "the new store: a file that does not exist, or a redis:// URL whose store holds no spend")
		asJSON := fs.Bool("json", false, "print the result as JSON: {from, to, delegations}")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if *from == "" || *to == "" {
				return usagef("give the store to copy (--from) and the new store (--to)")
			}
			n, err := budget.Migrate(*from, *to)
			if err != nil {
				return inputf("%v", err)
			}
			if *asJSON {
				return writeJSON(e, struct {
					From        string `json:"from"`
					To          string `json:"to"`
					Delegations int    `json:"delegations"`
				}{redactStore(*from), redactStore(*to), n})
			}
			fmt.Fprintf(e.stdout, "copied the spend of %d delegations from %s to %s\n", n, redactStore(*from), redactStore(*to))
			return nil
		}
	},
}
