package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/ldp"
	"github.com/delegateos/delegateos/reputation"
)

var ldpRouteCmd = &command{
	name: "route",
	args: "--skill S [--budget N] [--trust-domain NAME] [--require-domain NAME] [--workspace DIR]\n" +
		"                    [--timeout D] [--json] URL...",
	summary: "rank LDP delegates for a task by the RDP reputation this workspace holds for them, and say why (exit 1 if none can take it)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		skill := fs.String("skill", "", "the skill the task needs (a capability name on the delegates' cards)")
		budget := fs.Int64("budget", 0, "the most the task may cost, in microcents: a delegate that costs more, or does not say, is excluded (default: no limit)")
		domain := fs.String("trust-domain", "", "this router's trust domain: a delegate that would refuse a session from it (LDP §7.2) is excluded")
		require := fs.String("require-domain", "", "exclude a delegate not in trust domain NAME (§7.2 rule 1)")
		dir := workspaceFlag(fs)
		timeout := fs.Duration("timeout", 10*time.Second, "how long each delegate may take to answer")
		asJSON := fs.Bool("json", false, "print the ranking as JSON")
		return func(e *env, args []string) error {
			if *skill == "" {
				return usagef("--skill is required")
			}
			if len(args) == 0 {
				return usagef("give at least one delegate URL")
			}
			if *budget < 0 || *timeout <= 0 {
				return usagef("--budget must not be negative and --timeout must be positive")
			}
			targets := make([]string, len(args))
			for i, a := range args {
				u, err := identityURL(a)
				if err != nil {
					return usagef("%v", err)
				}
				targets[i] = u
			}
			w, err := openWorkspace(*dir)
			if err != nil {
				return err
			}
			now := time.Now()
			var lookupErr error
			lookup := func(did, skill string) (float64, float64, int, bool) {
				p, err := w.Profile(did)
				if err != nil {
					if !errors.Is(err, reputation.ErrNotFound) && lookupErr == nil {
						lookupErr = err
					}
					return 0, 0, 0, false
				}
				v := p.DomainScore(skill, now)
				return v.Score, v.Confidence, v.SampleSize, v.Known
			}
			client := cardClient(*timeout)
			cards := make([]*ldp.IdentityCard, len(args))
			errs := make([]error, len(args))
			for i := range args {
				cards[i], errs[i] = fetchCard(client, targets[i])
				if errs[i] == nil {
					if err := proveKey(args[i], cards[i], *timeout); err != nil {
						cards[i], errs[i] = nil, err
					}
				}
			}
			ranked := ldp.Route(ldp.RouteRequest{Skill: *skill, Budget: *budget, TrustDomain: *domain,
				RequiredDomain: *require, Reputation: lookup}, args, cards, errs)
			if lookupErr != nil {
				return inputError{fmt.Errorf("reputation workspace %s: %w", *dir, lookupErr)}
			}
			chosen := len(ranked) > 0 && ranked[0].Excluded == ""
			if *asJSON {
				out := routeReport{Skill: *skill, Budget: *budget, Candidates: ranked}
				if chosen {
					out.Chosen = ranked[0].URL
				}
				if err := writeJSON(e, out); err != nil {
					return err
				}
			} else {
				writeRoute(e.stdout, ranked, chosen)
			}
			if !chosen {
				return checkError{fmt.Sprintf("no delegate can take a %s task", *skill)}
			}
			return nil
		}
	},
}

// proveKey holds a card's did:key to the delegate at url: the reputation
// held for a key counts only for the delegate that signs with it, so a
// card that names another's key would borrow its reputation. The delegate
// is sent a HELLO signed with a key made for the purpose, and its reply
// (whatever it says) must be signed with the card's key, fresh and
// addressed to that HELLO's sender. A card naming no key proves nothing
// and is ranked without reputation.
func proveKey(url string, card *ldp.IdentityCard, timeout time.Duration) error {
	did := card.Metadata[ldp.MetaDID]
	if did == "" {
		return nil
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	c := &ldp.Client{ID: "ldp:delegate:router-" + newDelegationID()[4:], Key: key, Verifier: &ldp.Verifier{}, HTTP: cardClient(timeout)}
	hello := &ldp.Envelope{To: card.DelegateID, Body: &ldp.Hello{DelegateID: c.ID, SupportedModes: []ldp.PayloadMode{ldp.ModeText}}, PayloadMode: ldp.ModeText}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := c.Send(ctx, url, hello, "", did); err != nil {
		return fmt.Errorf("its card names %s, but its reply to a HELLO does not prove it holds that key: %v", did, err)
	}
	return nil
}

type routeReport struct {
	Skill      string          `json:"skill"`
	Budget     int64           `json:"budget,omitempty"`
	Chosen     string          `json:"chosen,omitempty"`
	Candidates []ldp.Candidate `json:"candidates"`
}

func writeRoute(w io.Writer, ranked []ldp.Candidate, chosen bool) {
	for i, c := range ranked {
		mark := "  "
		if i == 0 && chosen {
			mark = "→ "
		}
		name := c.DelegateID
		if name == "" {
			name = "(no card)"
		}
		if c.Excluded != "" {
			fmt.Fprintf(w, "%s%s %s: excluded: %s\n", mark, c.URL, name, c.Excluded)
			continue
		}
		fmt.Fprintf(w, "%s%s %s: rank %.3f: %s\n", mark, c.URL, name, c.Rank, c.Why)
	}
	if chosen && ranked[0].DID != "" {
		fmt.Fprintf(w, "chosen %s; its replies must be signed by %s\n", ranked[0].URL, ranked[0].DID)
	} else if chosen {
		fmt.Fprintf(w, "chosen %s; its card names no did:key, so nothing binds its replies to a key\n", ranked[0].URL)
	}
}
