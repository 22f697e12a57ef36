package main

import (
	"fmt"
	"github.com/delegateos/delegateos/internal/redisconn"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/revocation"
)

var revokeCmd = &command{
	name:    "revoke",
	args:    "--key FILE --token TOKEN (--block N | --id REVOCATION_ID) [--scope chain|block] --list FILE|URL [--replicas N] [--json]",
	summary: "append a signed revocation to a revocation list file (created if missing)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		key := fs.String("key", "", "the revoker's key file: the signer of the block or of a block before it")
		token := fs.String("token", "", "the token whose block to revoke; - reads standard input, @FILE reads a file")
		block := fs.Int("block", -1, "the block to revoke: 0 is the authority, 1 the first attenuation, ...")
		id := fs.String("id", "", "the revocation ID to revoke, instead of --token and --block")
		scope := fs.String("scope", string(revocation.ScopeChain), "recorded in the signed entry; either scope revokes every token that contains the block (DelegateOS §10.1)")
		list := fs.String("list", "", "the revocation list file, or the redis:// (rediss://) URL of a list a fleet of proxies shares")
		asJSON := fs.Bool("json", false, "print the signed entry as JSON")
		replicas := fs.Int("replicas", 0, "with a Redis list, succeed only once N replicas of the list's primary have the entry (WAIT); fails, naming how many do, otherwise")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if *list == "" {
				return usagef("--list is required")
			}
			if *replicas < 0 || (*replicas > 0 && !redisconn.IsURL(*list)) {
				return usagef("--replicas N takes N >= 0, with a redis:// list")
			}
			sc := revocation.Scope(*scope)
			if sc != revocation.ScopeChain && sc != revocation.ScopeBlock {
				return usagef("--scope must be chain or block")
			}
			if (*id == "") == (*block < 0) {
				return usagef("give exactly one of --block (with --token) and --id")
			}
			k, err := loadKey(*key)
			if err != nil {
				return err
			}
			revID := *id
			if *block >= 0 {
				tok, err := parseToken(e, *token)
				if err != nil {
					return err
				}
				if *block >= tok.Blocks() {
					return usagef("--block %d: the token has blocks 0..%d", *block, tok.Blocks()-1)
				}
				// An entry is honoured only when the revoker signed the block
				// or one before it; refuse to write one that would be ignored.
				if !slices.Contains(tok.Signers()[:*block+1], k.ID()) {
					return checkError{fmt.Sprintf("refused: %s did not sign block %d or any block before it, so verifiers would ignore this revocation", k.ID(), *block)}
				}
				revID = tok.RevocationIDs()[*block]
			}
			entry, err := revocation.NewEntry(k, revID, sc, time.Now())
			if err != nil {
				return usageError{msg: err.Error()}
			}
			if err := revocation.AppendReplicas(*list, entry, *replicas); err != nil {
				return inputError{err}
			}
			if *asJSON {
				return writeJSON(e, entry)
			}
			fmt.Fprintf(e.stdout, "revoked %s (scope %s) in %s\n", revID, sc, redactStore(*list))
			return nil
		}
	},
}

// redactStore returns a store's path, or its URL without a password.
func redactStore(s string) string {
	if redisconn.IsURL(s) {
		return redisconn.Redact(s)
	}
	return s
}
