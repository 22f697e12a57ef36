package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/internal/redisconn"
)

var storeGroup = &command{
	name:    "store",
	summary: "move a spend store between a shared database, a spend log of an earlier version and Redis, and mend a Redis store that lost data",
	subs:    []*command{storeMigrateCmd, storeInitCmd, storeRecoverCmd},
}

var storeInitCmd = &command{
	name:    "init",
	args:    "--store URL [--reset [--root ID]...] [--json]",
	summary: "give a Redis spend store its identity, or, with --reset, accept that it lost data and lift its store_reset state",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		store := fs.String("store", "", "the redis:// URL of the fleet's spend store")
		reset := fs.Bool("reset", false, "accept that the store lost data (its spend restarts from what it holds now): give it a new generation, which every proxy adopts at its next call, lifting store_reset; prefer 'store recover', which rebuilds the spend from the audit logs")
		roots := fs.StringArray("root", nil, "with --reset: accept the loss of the delegation trees of this root issuer (principal ID or did:key) only (repeatable); other trees marked lost stay refused, as another fleet's on a shared Redis")
		asJSON := fs.Bool("json", false, "print the store's identity as JSON: {store, id, generation}")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if !redisconn.IsURL(*store) {
				return usagef("give the redis:// URL of the spend store (--store URL)")
			}
			if len(*roots) > 0 && !*reset {
				return usagef("--root limits what --reset accepts: give --reset too")
			}
			var ids []string
			for _, r := range *roots {
				id, err := principal("--root", r)
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
			id, err := budget.InitStore(*store, budget.StateDir(), *reset, ids...)
			if err != nil {
				return inputf("%v", err)
			}
			if *asJSON {
				return writeJSON(e, struct {
					Store      string `json:"store"`
					ID         string `json:"id"`
					Generation int64  `json:"generation"`
				}{redactStore(*store), id.ID, id.Gen})
			}
			fmt.Fprintf(e.stdout, "spend store %s: identity %s, generation %d\n", redactStore(*store), id.ID, id.Gen)
			return nil
		}
	},
}

var storeMigrateCmd = &command{
	name:    "migrate",
	args:    "--from FILE|URL --to FILE|URL [--json]",
	summary: "copy a spend store to a new shared database or an empty Redis store (redis://, rediss://), or turn a spend log of an earlier version into a database in place (--to the same path), keeping every delegation's spend",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		from := fs.String("from", "", "the spend store to copy: a database, a spend log of an earlier version (held while it is read, so no proxy may have it open) or a redis:// URL (stop the proxies of a database or Redis first)")
		to := fs.String("to", "", "the new store: a database file that does not exist, the --from spend log itself (migrated in place, the log kept as FILE.log-migrated), or a redis:// URL whose store holds no spend")
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
