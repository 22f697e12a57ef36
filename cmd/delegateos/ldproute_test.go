package main

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

func routeKey(n byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = n
	return ed25519.NewKeyFromSeed(seed)
}

func routeDID(n byte) string {
	return identity.DIDFromPublicKey(routeKey(n).Public().(ed25519.PublicKey))
}

// routeCardJSON is a card for the skill "reasoning" with a self-reported
// quality, a cost in microcents and a did:key.
func routeCardJSON(id, domain string, quality float64, cost int, did string) string {
	return fmt.Sprintf(`{"delegate_id":"ldp:delegate:%s","name":"%s","model_family":"f","model_version":"v","trust_domain":{"name":"%s","allow_cross_domain":false,"trusted_peers":[]},"context_window":8192,"capabilities":[{"name":"reasoning","quality_hint":%g}],"supported_payload_modes":["text"],"endpoint":"http://example.invalid/%s","metadata":{"delegateos.did":"%s","delegateos.cost.reasoning":"%d"}}`,
		id, id, domain, quality, id, did, cost)
}

// TestLDPRoute: the router prefers the delegate this workspace has seen do
// well over one that only claims a high quality, excludes what cannot
// take the task, and says why — through the real binary, with signals
// recorded by the real binary.
func TestLDPRoute(t *testing.T) {
	cards := map[string]string{
		"/proven":    routeCardJSON("proven", "research", 0.6, 500, routeDID(1)),
		"/boaster":   routeCardJSON("boaster", "research", 0.99, 400, routeDID(2)),
		"/failed":    routeCardJSON("failed", "research", 0.9, 100, routeDID(3)),
		"/pricey":    routeCardJSON("pricey", "research", 0.9, 5000, routeDID(4)),
		"/elsewhere": routeCardJSON("elsewhere", "finance", 0.9, 100, routeDID(5)),
	}
	// Each is a live delegate signing with the key its card names, but
	// the impostor, whose card names the proven delegate's key.
	cards["/impostor"] = routeCardJSON("impostor", "research", 0.99, 10, routeDID(1))
	keys := map[string]byte{"/proven": 1, "/boaster": 2, "/failed": 3, "/pricey": 4, "/elsewhere": 5, "/impostor": 7}
	mux := http.NewServeMux()
	for path, card := range cards {
		c, err := ldp.ParseCard([]byte(card))
		if err != nil {
			t.Fatal(err)
		}
		r := &ldp.Responder{Card: c, Key: routeKey(keys[path]), Verifier: &ldp.Verifier{}}
		mux.Handle(path+"/", http.StripPrefix(path, &ldp.Handler{Responder: r}))
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ws := t.TempDir()
	signal := func(did, score string) {
		t.Helper()
		if out, errs, code := mcptest.CLI(t, "reputation", "signal", "--workspace", ws, "--agent", did, "--domain", "reasoning",
			"--score", score, "--source", routeDID(9)); code != 0 {
			t.Fatalf("signal: exit %d\n%s%s", code, out, errs)
		}
	}
	for range 5 {
		signal(routeDID(1), "0.9")
		signal(routeDID(3), "0.2")
	}
	urls := []string{srv.URL + "/boaster", srv.URL + "/failed", srv.URL + "/proven", srv.URL + "/pricey", srv.URL + "/elsewhere", srv.URL + "/impostor", srv.URL + "/gone"}
	args := append([]string{"ldp", "route", "--skill", "reasoning", "--budget", "1000", "--trust-domain", "research", "--workspace", ws}, urls...)
	out, errs, code := mcptest.CLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i, want := range []string{
		"→ " + srv.URL + "/proven ldp:delegate:proven: rank 0.", // reputation 0.9 over 5 signals
		"  " + srv.URL + "/boaster ldp:delegate:boaster: rank 0.500: no reputation held for " + routeDID(2) + "; self-reported quality 0.99; cost 400 microcents",
		"  " + srv.URL + "/failed ldp:delegate:failed: rank 0.",
		"  " + srv.URL + "/pricey ldp:delegate:pricey: excluded: costs 5000 microcents, over the budget of 1000",
		"  " + srv.URL + "/elsewhere ldp:delegate:elsewhere: excluded: trust domain: CROSS_DOMAIN_REFUSED",
		"  " + srv.URL + "/impostor (no card): excluded: identity card: its card names " + routeDID(1) + ", but its reply to a HELLO does not prove it holds that key",
		"  " + srv.URL + "/gone (no card): excluded: identity card: GET",
		"chosen " + srv.URL + "/proven; its replies must be signed by " + routeDID(1),
	} {
		if i >= len(lines) || !strings.HasPrefix(lines[i], want) {
			t.Fatalf("line %d: want prefix %q\n%s", i, want, out)
		}
	}
	if !strings.Contains(lines[0], "RDP reasoning score 0.90 with confidence") || !strings.Contains(lines[0], "(5 signals)") {
		t.Fatalf("the choice is not explained by reputation: %s", lines[0])
	}

	out, _, code = mcptest.CLI(t, append([]string{"ldp", "route", "--json", "--skill", "reasoning", "--trust-domain", "research", "--workspace", ws}, urls[:3]...)...)
	var report routeReport
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != 0 {
		t.Fatalf("exit %d %v\n%s", code, err, out)
	}
	if report.Chosen != srv.URL+"/proven" || report.Candidates[0].Reputation.Samples != 5 || report.Candidates[2].URL != srv.URL+"/failed" {
		t.Fatalf("%+v", report)
	}

	// Nobody can take it: exit 1, with each reason.
	out, errs, code = mcptest.CLI(t, "ldp", "route", "--skill", "poetry", "--workspace", ws, srv.URL+"/proven")
	if code != 1 || !strings.Contains(out, `excluded: no skill "poetry"`) || !strings.Contains(errs, "no delegate can take a poetry task") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if _, errs, code = mcptest.CLI(t, "ldp", "route", srv.URL+"/proven"); code != 2 || !strings.Contains(errs, "--skill is required") {
		t.Fatalf("no skill: exit %d %s", code, errs)
	}
}
