package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/ratelimit"
	"github.com/delegateos/delegateos/storerecover"
)

var storeRecoverCmd = &command{
	name:    "recover",
	args:    "--store URL --root ID --audit LOG... [--head LOG=DIGEST]... [--policy FILE] [--workspace DIR]... [--ended URL] [--key-id DID]... [--json]",
	summary: "rebuild the spend of a Redis spend store that lost data from the fleet's signed audit logs (and its ended delegations from their workspaces), and lift its store_reset state",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		store := fs.String("store", "", "the redis:// URL of the fleet's spend store")
		root := fs.String("root", "", "the principal ID (or did:key) that issued the delegation trees whose spend is rebuilt: the receipts name each call's delegations, not their issuer")
		logs := fs.StringArray("audit", nil, "an audit log of a proxy of the fleet (repeatable: give every proxy's, or the spend of the calls in the missing ones is not rebuilt)")
		heads := fs.StringArray("head", nil, "LOG=DIGEST: the head its proxy logged when it closed LOG (\"audit log closed\"), which the log must hold (repeatable): a log cut back past it is refused, and nothing is rebuilt")
		policyPath := fs.String("policy", "", "the fleet's policy file: the rate-limit windows of its rate: settings are rebuilt from the calls in the logs (without it they restart empty)")
		workspaces := fs.StringArray("workspace", nil, "a workspace of a proxy of the fleet (repeatable): the delegations its "+wsDelegations+" records ended (completed, failed, revoked) are recorded again in the ended-delegation set")
		ended := fs.String("ended", "", "the redis:// URL of the fleet's ended-delegation set (default: --store)")
		keyIDs := fs.StringArray("key-id", nil, "the did:key the entries must be signed by (repeatable; default: each log's first signer, for every entry of that log)")
		asJSON := fs.Bool("json", false, "print the result as JSON: {store, generation, delegations, receipts, unaccounted}")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if !redisconn.IsURL(*store) {
				return usagef("give the redis:// URL of the spend store (--store URL)")
			}
			if len(*logs) == 0 {
				return usagef("give the fleet's audit logs (--audit LOG, once per log)")
			}
			issuer, err := principal("--root", *root)
			if err != nil {
				return err
			}
			trusted, err := trustedKeys(*keyIDs)
			if err != nil {
				return err
			}
			headOf := map[string]string{}
			for _, h := range *heads {
				path, digest, ok := strings.Cut(h, "=")
				if !ok || !slices.Contains(*logs, path) || len(digest) != 64 || strings.Trim(digest, "0123456789abcdef") != "" {
					return usagef("--head %q: give LOG=DIGEST, LOG one of the --audit logs and DIGEST the 64 lower-case hex digits its proxy logged as head", h)
				}
				headOf[path] = digest
			}
			var pol *policy.Policy
			if *policyPath != "" {
				if pol, err = policy.Load(*policyPath); err != nil {
					return policyLoadError(*policyPath, err)
				}
			}
			rb := storerecover.New(issuer, pol, headOf)
			for _, path := range *logs {
				err := rb.Read(path, trusted)
				var unverified *storerecover.UnverifiedError
				switch {
				case errors.As(err, &unverified):
					return inputf("%v; check it with 'delegateos audit verify %s --open', and leave out a log that is not the fleet's", err, path)
				case err != nil:
					return inputError{err}
				}
			}
			var endedDs []chain.Delegation
			for _, ws := range *workspaces {
				ds, err := chain.Load(filepath.Join(ws, wsDelegations))
				if err != nil {
					return inputf("the workspace %s: %v", ws, err)
				}
				endedDs = append(endedDs, ds...)
			}
			endedURL := *ended
			if endedURL == "" {
				endedURL = *store
			}
			nEnded, err := chain.RepublishEnded(endedURL, endedDs)
			if err != nil {
				return inputf("%v", err)
			}
			nRates := 0
			if pol != nil && len(rb.Rates()) > 0 {
				if nRates, err = ratelimit.RebuildRedis(*store, gate.RateLimits(pol), rb.Rates()); err != nil {
					return inputf("%v", err)
				}
			}
			usage := rb.Usage()
			id, err := budget.RecoverStore(*store, budget.StateDir(), usage)
			if err != nil {
				return inputf("%v", err)
			}
			unaccounted := rb.Unaccounted()
			if *asJSON {
				return writeJSON(e, struct {
					Store       string   `json:"store"`
					Generation  int64    `json:"generation"`
					Delegations int      `json:"delegations"`
					Receipts    int      `json:"receipts"`
					Ended       int      `json:"ended"`
					RateLogs    int      `json:"rate_logs"`
					Unaccounted []string `json:"unaccounted"`
				}{redactStore(*store), id.Gen, len(usage), rb.Allowed(), nEnded, nRates, unaccounted})
			}
			fmt.Fprintf(e.stdout, "rebuilt the spend of %d delegations of %s from %d allowed calls in %d audit logs; the store's generation is now %d and its proxies take calls again\n",
				len(usage), redactStore(*store), rb.Allowed(), len(*logs), id.Gen)
			if pol != nil {
				fmt.Fprintf(e.stdout, "rebuilt %d rate-limit windows\n", nRates)
			}
			if len(*workspaces) > 0 {
				fmt.Fprintf(e.stdout, "recorded %d ended delegations of %d workspaces in the ended-delegation set\n", nEnded, len(*workspaces))
			}
			for _, u := range unaccounted {
				fmt.Fprintf(e.stdout, "not accounted for: %s\n", u)
			}
			return nil
		}
	},
}
