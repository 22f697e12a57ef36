package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// failingExec fails every task with the error it is set to.
type failingExec struct {
	mu  sync.Mutex
	err ldp.LdpError
}

func (x *failingExec) set(e ldp.LdpError) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.err = e
}

func (x *failingExec) Execute(context.Context, *ldp.Task) (*ldp.Outcome, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return nil, &ldp.TaskError{LdpError: x.err}
}

// failingDelegate is a delegate (ldp.Handler on a test server, skill
// summarize, capability docs:read:/reports/**) whose every task fails as
// x is set, and what an initiator needs to submit to it with --record:
// the agent's key file, a token file of it (docs:read:/**), a workspace
// and the observer (--source, the root's DID).
type failingDelegate struct {
	x                                         *failingExec
	url, did, agentKey, tokFile, ws, observer string
}

func newFailingDelegate(t *testing.T) *failingDelegate {
	t.Helper()
	env := mcptest.NewEnv(t)
	tokFile := filepath.Join(env.Dir, "agent.tok")
	os.WriteFile(tokFile, []byte(env.Mint(nil, "docs:read:/**").String()), 0o600)
	agentKey := env.KeyFile(env.Agent)
	key := mcptest.NewKey(t, "delegate")
	x := &failingExec{}
	r := &ldp.Responder{Exec: x, Key: key.PrivateKey(), Verifier: &ldp.Verifier{}}
	srv := httptest.NewUnstartedServer(&ldp.Handler{Responder: r})
	url := "http://" + srv.Listener.Addr().String()
	did := identity.DIDFromPublicKey(key.PrivateKey().Public().(ed25519.PublicKey))
	r.Card = &ldp.IdentityCard{DelegateID: "ldp:delegate:reports", Name: "Reports", ModelFamily: "none", ModelVersion: "1",
		TrustDomain: ldp.TrustDomain{Name: "research"}, ContextWindow: 8192,
		Capabilities: []ldp.Capability{{Name: "summarize"}}, SupportedPayloadModes: []ldp.PayloadMode{ldp.ModeText}, Endpoint: url,
		Metadata: map[string]string{ldp.MetaDID: did, ldp.MetaCapabilityPrefix + "summarize": "docs:read:/reports/**"}}
	srv.Start()
	t.Cleanup(srv.Close)
	ws := t.TempDir()
	observer := identity.DIDFromPublicKey(env.Root.Public())
	return &failingDelegate{x: x, url: url, did: did, agentKey: agentKey, tokFile: tokFile, ws: ws, observer: observer}
}

// recordReport is what 'ldp submit --record --json' says of the record.
type recordReport struct {
	Recorded *struct {
		Score   float64 `json:"score"`
		Message string  `json:"message"`
	} `json:"recorded"`
	NotRecorded string `json:"not_recorded"`
}

// submit has the delegate fail with e and runs 'ldp submit --record
// --json' of a task, with extra flags, which must exit 1; it returns
// the report.
func (d *failingDelegate) submit(t *testing.T, e ldp.LdpError, extra ...string) recordReport {
	t.Helper()
	d.x.set(e)
	args := []string{"ldp", "submit", "--key", d.agentKey, "--token", "@" + d.tokFile, "--skill", "summarize",
		"--input", `"x"`, "--trust-domain", "research", "--record", "--source", d.observer, "--workspace", d.ws, "--json"}
	args = append(append(args, extra...), d.url)
	out, errs, code := mcptest.CLI(t, args...)
	var rep recordReport
	if code != 1 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("%s/%s: exit %d\n%s%s", e.Code, e.Category, code, out, errs)
	}
	return rep
}

// TestLDPSubmitFailureCategory: 'ldp submit --record' does not take the
// category a delegate gives its failure on its word: a failure it calls a
// refusal is left out of the delegate's reputation only when its code is
// one the table of docs/ldp.md gives that category and the exchange does
// not contradict it; a made-up code, a DelegateOS denial type under
// another category, or a refusal the initiator knows to be false
// (capability_not_granted for the capability the card states, which the
// token sent grants; an envelope refusal of a task signed a moment before
// by its token's holder) is counted as the delegate's failure (0.0).
func TestLDPSubmitFailureCategory(t *testing.T) {
	d := newFailingDelegate(t)
	did := d.did
	recorded := "recorded: domain-competence summarize 0.00 for " + did
	for _, c := range []struct {
		code, category, cap, want string
	}{
		// A token narrowed (--cap) to another capability than the card's:
		// the refusal may be true.
		{"capability_not_granted", "policy", "docs:read:/other/**", "not recorded: a policy refusal (capability_not_granted)"},
		{"rate_limited", "policy", "", "not recorded: a policy refusal (rate_limited)"},
		{"invalid_token", "security", "", "not recorded: a security refusal (invalid_token)"},
		// Refusals this exchange contradicts (rtldp3 #5; these two were
		// taken as refusals before): the token submit narrowed to the
		// card's capability grants it; the task was signed a moment
		// before by its token's holder.
		{"capability_not_granted", "policy", "", recorded},
		{"signature_missing", "security", "", recorded},
		{"NOT_MY_FAULT", "policy", "", recorded},
		{"capability_not_granted", "session", "", recorded},
		{"store_unavailable", "policy", "", recorded},
		{"TOOL_ERROR", "runtime", "", recorded},
	} {
		var extra []string
		if c.cap != "" {
			extra = []string{"--cap", c.cap}
		}
		rep := d.submit(t, ldp.LdpError{Code: c.code, Category: c.category, Severity: "error", Message: "no"}, extra...)
		got := "not recorded: " + rep.NotRecorded
		if rep.Recorded != nil {
			got = "recorded: domain-competence summarize 0.00 for " + did
			if rep.Recorded.Score != 0 {
				got = "recorded a score"
			}
		}
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%s/%s: %s", c.code, c.category, got)
		}
	}
}

// TestServeLDPFailureCategory: serve gives each refusal the category the
// table of docs/ldp.md gives its code: a DelegateOS denial of the token's
// authority is policy, a token that is not one is security (it was
// policy), a rate limit is policy and retryable.
func TestServeLDPFailureCategory(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv := startLDPServe(t, env, "server")
	ctx := context.Background()
	holder := &ldp.Client{ID: "ldp:delegate:holder", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	s, err := holder.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}},
		&ldp.DelegateOSMember{DCT: env.Mint(nil, "mcp:echo:*").String(), Format: dct.Format}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		token    *ldp.DelegateOSMember
		code     string
		category string
	}{
		{"outside the token", &ldp.DelegateOSMember{DCT: env.Mint(nil, "docs:read:/**").String(), Format: dct.Format}, "capability_not_granted", "policy"},
		{"not a token", &ldp.DelegateOSMember{DCT: "not-a-token", Format: dct.Format}, "malformed_token", "security"},
		{"over budget", &ldp.DelegateOSMember{DCT: env.Mint(mcptest.Budget(10), "mcp:echo:*").String(), Format: dct.Format}, "budget_exceeded", "policy"},
	} {
		reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: strings.ReplaceAll(c.name, " ", "-"), Skill: "echo", Input: json.RawMessage(`"x"`)}, "", c.token, nil)
		if err != nil {
			t.Fatal(err)
		}
		f, ok := reply.Body.(*ldp.TaskFailed)
		if !ok || f.Error.Code != c.code || f.Error.Category != c.category || ldp.DelegatesFailure(f.Error) {
			t.Errorf("%s: %+v", c.name, reply.Body)
		}
	}
}
