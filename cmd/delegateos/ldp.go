package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/internal/render"
	"github.com/delegateos/delegateos/ldp"
)

// ldpGroup holds the commands of an LDP initiator (LDP 0.1, docs/ldp.md).
var ldpGroup = &command{
	name:    "ldp",
	summary: "discover LDP delegates, choose one for a task and hand it the task (LLM Delegate Protocol 0.1)",
	subs:    []*command{ldpDiscoverCmd, ldpRouteCmd, ldpSubmitCmd, ldpApproveCmd},
}

var ldpDiscoverCmd = &command{
	name:    "discover",
	args:    "[--require-domain NAME] [--timeout D] [--json] URL...",
	summary: "fetch each delegate's identity card (GET URL/.well-known/ldp-identity) and validate it (exit 1 if any is refused)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		domain := fs.String("require-domain", "", "refuse a delegate whose trust domain is not NAME (LDP §7.2 rule 1, as required_trust_domain)")
		timeout := fs.Duration("timeout", 10*time.Second, "how long each delegate may take to answer")
		asJSON := fs.Bool("json", false, "print each URL's card or refusal as JSON")
		return func(e *env, args []string) error {
			if len(args) == 0 {
				return usagef("give at least one delegate URL, e.g. delegateos ldp discover https://delegate.example")
			}
			if *timeout <= 0 {
				return usagef("--timeout must be positive")
			}
			targets := make([]string, len(args))
			for i, a := range args {
				u, err := identityURL(a)
				if err != nil {
					return usagef("%v", err)
				}
				targets[i] = u
			}
			client := cardClient(*timeout)
			report := discoverReport{Delegates: make([]discovered, len(args))}
			for i, a := range args {
				d := discovered{URL: a, IdentityURL: targets[i]}
				card, err := fetchCard(client, targets[i])
				if err == nil && *domain != "" && card.TrustDomain.Name != *domain {
					err = fmt.Errorf("trust domain %q is not the required %q", card.TrustDomain.Name, *domain)
				}
				if err != nil {
					d.Error = err.Error()
					report.Refused++
				} else {
					d.Card = card
					d.EndpointMatches = sameEndpoint(card.Endpoint, a)
					report.Valid++
				}
				report.Delegates[i] = d
			}
			if *asJSON {
				if err := writeJSON(e, report); err != nil {
					return err
				}
			} else {
				for _, d := range report.Delegates {
					writeDiscovered(e.stdout, d)
				}
			}
			if report.Refused > 0 {
				return checkError{fmt.Sprintf("%d of %d identity cards refused", report.Refused, len(args))}
			}
			return nil
		}
	},
}

type discoverReport struct {
	Delegates []discovered `json:"delegates"`
	Valid     int          `json:"valid"`
	Refused   int          `json:"refused"`
}

type discovered struct {
	URL         string            `json:"url"`
	IdentityURL string            `json:"identity_url"`
	Card        *ldp.IdentityCard `json:"card,omitempty"`
	// EndpointMatches says whether the card's endpoint is the URL it was
	// fetched from; a router sends to the URL it was given either way.
	EndpointMatches bool   `json:"endpoint_matches"`
	Error           string `json:"error,omitempty"`
}

// cardClient fetches identity cards. A card is taken only from the URL
// asked: a redirect would let one host speak for another.
func cardClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// identityURL is where the delegate at base serves its card: base with
// ldp.WellKnownPath appended (a URL already ending in it is taken as is).
func identityURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an http or https URL", base)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", fmt.Errorf("%q: a delegate URL has no user information, query or fragment", base)
	}
	if !strings.HasSuffix(u.Path, ldp.WellKnownPath) {
		u.Path = strings.TrimSuffix(u.Path, "/") + ldp.WellKnownPath
		u.RawPath = ""
	}
	return u.String(), nil
}

// sameEndpoint reports whether the card's endpoint names the URL given.
func sameEndpoint(endpoint, given string) bool {
	norm := func(s string) string {
		return strings.TrimSuffix(strings.TrimSuffix(s, ldp.WellKnownPath), "/")
	}
	return norm(endpoint) == norm(given)
}

func fetchCard(client *http.Client, target string) (*ldp.IdentityCard, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("GET %s: %v", target, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 3 {
		return nil, fmt.Errorf("GET %s: redirected (%s) to %q; cards are not taken from redirects: discover that URL if you trust it", target, resp.Status, resp.Header.Get("Location"))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", target, resp.Status)
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, fmt.Errorf("GET %s: Content-Type %q, want application/json (LDP §2.3)", target, resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, ldp.MaxCardSize+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v", target, err)
	}
	return ldp.ParseCard(body)
}

func writeDiscovered(w io.Writer, d discovered) {
	if d.Card == nil {
		fmt.Fprintf(w, "%s: refused: %s\n", d.URL, oneLine(d.Error))
		return
	}
	c := d.Card
	fmt.Fprintf(w, "%s: %s (%s)\n", d.URL, c.DelegateID, c.Name)
	fmt.Fprintf(w, "  model:         %s %s, context %d tokens\n", c.ModelFamily, c.ModelVersion, c.ContextWindow)
	td := c.TrustDomain
	switch {
	case !td.AllowCrossDomain:
		fmt.Fprintf(w, "  trust domain:  %s (no sessions from other domains)\n", td.Name)
	default:
		fmt.Fprintf(w, "  trust domain:  %s (also trusts: %s)\n", td.Name, orNone(strings.Join(td.TrustedPeers, ", ")))
	}
	modes := make([]string, len(c.SupportedPayloadModes))
	for i, m := range c.SupportedPayloadModes {
		modes[i] = string(m)
	}
	fmt.Fprintf(w, "  payload modes: %s\n", strings.Join(modes, ", "))
	note := ""
	if !d.EndpointMatches {
		note = " (not the URL it was fetched from)"
	}
	fmt.Fprintf(w, "  endpoint:      %s%s\n", c.Endpoint, note)
	for _, p := range []struct{ k, v string }{{"reasoning", c.ReasoningProfile}, {"cost", c.CostProfile},
		{"latency", c.LatencyProfile}, {"jurisdiction", c.Jurisdiction}} {
		if p.v != "" {
			fmt.Fprintf(w, "  %-14s %s\n", p.k+":", p.v)
		}
	}
	if len(c.Capabilities) == 0 {
		fmt.Fprintf(w, "  capabilities:  none\n")
	}
	for _, cp := range c.Capabilities {
		var hints []string
		if q, ok := cp.QualityScore(); ok {
			hints = append(hints, fmt.Sprintf("quality %.2f (self-reported)", q))
		}
		if cp.LatencyHintMsP50 != nil {
			hints = append(hints, fmt.Sprintf("p50 %d ms", *cp.LatencyHintMsP50))
		} else if cp.Quality != nil && cp.Quality.LatencyP50Ms != nil {
			hints = append(hints, fmt.Sprintf("p50 %d ms", *cp.Quality.LatencyP50Ms))
		}
		if cp.CostHint != "" {
			hints = append(hints, "cost "+cp.CostHint)
		} else if cp.Quality != nil && cp.Quality.CostPerCallUSD != nil {
			hints = append(hints, fmt.Sprintf("$%g a call", *cp.Quality.CostPerCallUSD))
		}
		fmt.Fprintf(w, "  capability:    %s (%s)\n", cp.Name, orNone(strings.Join(hints, ", ")))
	}
	keys := make([]string, 0, len(c.Metadata))
	for k := range c.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		// Metadata values are free text (newlines allowed): quoted when
		// they would break or forge a line.
		fmt.Fprintf(w, "  metadata:      %s=%s\n", k, render.Printable(c.Metadata[k]))
	}
}
