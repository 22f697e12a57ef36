// Package interop checks delegateos against an independent JavaScript
// implementation of the SJT signing rules built on the libraries of the
// TypeScript reference implementation (@noble/ed25519, blakejs,
// canonicalize, pinned in js/package-lock.json). Ed25519 is deterministic,
// so the same keys and inputs must give byte-identical tokens.
package interop

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/revocation"
)

var npmOnce sync.Once
var npmErr error

// js runs one job through js/sjt.mjs, installing its pinned packages first.
func js(t *testing.T, job map[string]any, out any) {
	t.Helper()
	npmOnce.Do(func() {
		if _, err := os.Stat(filepath.Join("js", "node_modules")); err == nil {
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = "js"
		if b, err := cmd.CombinedOutput(); err != nil {
			npmErr = &exec.Error{Name: "npm ci: " + string(b), Err: err}
		}
	})
	if npmErr != nil {
		t.Fatalf("installing the JavaScript interop packages needs Node.js 20+ and npm: %v", npmErr)
	}
	in, _ := json.Marshal(job)
	cmd := exec.Command("node", "sjt.mjs")
	cmd.Dir = "js"
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("node sjt.mjs %s: %v\n%s", job["op"], err, stderr.String())
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("node output %q: %v", b, err)
	}
}

func seedHex(b byte) string { return hex.EncodeToString(bytes.Repeat([]byte{b}, 32)) }

func key(t *testing.T, b byte) *identity.Keypair {
	k, err := identity.FromSeed(bytes.Repeat([]byte{b}, 32), "")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var (
	issued  = time.Date(2026, 3, 1, 12, 0, 0, 123e6, time.UTC)
	expires = issued.Add(time.Hour)
	at      = issued.Add(time.Minute)
)

// chain builds root → A → B → C in Go: the second attenuation sets every
// optional field, including real zeros, and the third sets none.
func goChain(t *testing.T) []*dct.Token {
	root, a, b, c := key(t, 1), key(t, 2), key(t, 3), key(t, 4)
	t0, err := dct.Create(dct.CreateParams{
		Issuer: root, Delegatee: a.ID(), Capabilities: []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/**"}, {Namespace: "web", Action: "fetch", Resource: "https://example.com/*"}},
		ContractID: "ct_a1b2c3d4e5f6", DelegationID: "del_000000000001", MaxChainDepth: 3,
		MaxBudgetMicrocents: 1_000_000, ExpiresAt: expires, IssuedAt: issued,
	})
	if err != nil {
		t.Fatal(err)
	}
	caps := []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/sub/*"}}
	budget, depth := int64(250_000), int64(1)
	exp := expires.Add(-time.Minute)
	t1, err := dct.Attenuate(t0, dct.AttenuateParams{Attenuator: a, Delegatee: b.ID(), DelegationID: "del_000000000002", ContractID: "ct_a1b2c3d4e5f6",
		Capabilities: &caps, MaxBudgetMicrocents: &budget, ExpiresAt: &exp, MaxChainDepth: &depth, Now: at})
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	t2, err := dct.Attenuate(t1, dct.AttenuateParams{Attenuator: b, Delegatee: c.ID(), DelegationID: "del_000000000003", ContractID: "ct_a1b2c3d4e5f6",
		MaxChainDepth: &zero, Now: at})
	if err != nil {
		t.Fatal(err)
	}
	return []*dct.Token{t0, t1, t2}
}

type jsVerify struct {
	OK            bool     `json:"ok"`
	Problems      []string `json:"problems"`
	RevocationIDs []string `json:"revocationIds"`
	Canonical     bool     `json:"canonical"`
}

func TestGoTokensVerifyInJavaScript(t *testing.T) {
	for i, tok := range goChain(t) {
		var r jsVerify
		js(t, map[string]any{"op": "verify", "token": tok.String()}, &r)
		if !r.OK || !r.Canonical {
			t.Errorf("token %d: JavaScript says ok=%v canonical=%v problems=%v", i, r.OK, r.Canonical, r.Problems)
		}
		if got := tok.RevocationIDs(); !equal(got, r.RevocationIDs) {
			t.Errorf("token %d: revocation IDs differ:\n go %v\n js %v", i, got, r.RevocationIDs)
		}
	}
}

// TestSameBytes: the JavaScript implementation, given the same keys and
// fields, writes exactly the tokens Go writes.
func TestSameBytes(t *testing.T) {
	toks := goChain(t)
	var m struct{ Token string }
	auth := toks[0].Unverified().Authority
	auth.Issuer = "" // set by the JavaScript side from the seed
	js(t, map[string]any{"op": "mint", "seed": seedHex(1), "authority": authorityJSON(t, auth)}, &m)
	if m.Token != toks[0].String() {
		t.Fatalf("minted tokens differ:\n go %s\n js %s", toks[0], m.Token)
	}
	for i := 1; i < len(toks); i++ {
		att := toks[i].Unverified().Attenuations[i-1]
		var a struct{ Token string }
		js(t, map[string]any{"op": "attenuate", "seed": seedHex(byte(i + 1)), "token": m.Token, "attenuation": attenuationJSON(t, att)}, &a)
		if a.Token != toks[i].String() {
			t.Fatalf("attenuation %d differs:\n go %s\n js %s", i, toks[i], a.Token)
		}
		m.Token = a.Token
	}
}

func TestJavaScriptTokensVerifyInGo(t *testing.T) {
	root, a, b := key(t, 7), key(t, 8), key(t, 9)
	now := time.Now().UTC()
	var m struct{ Token string }
	js(t, map[string]any{"op": "mint", "seed": seedHex(7), "authority": map[string]any{
		"delegatee":    a.ID(),
		"capabilities": []map[string]string{{"namespace": "docs", "action": "read", "resource": "/project/**"}},
		"contractId":   "ct_0123456789ab", "delegationId": "del_0123456789ab", "parentDelegationId": dct.RootParentDelegationID,
		"chainDepth": 0, "maxChainDepth": 2, "maxBudgetMicrocents": 5000,
		"expiresAt": timestamp.Format(now.Add(time.Hour)), "issuedAt": timestamp.Format(now),
	}}, &m)
	var att struct{ Token string }
	js(t, map[string]any{"op": "attenuate", "seed": seedHex(8), "token": m.Token, "attenuation": map[string]any{
		"delegatee": b.ID(), "delegationId": "del_0123456789ac", "contractId": "ct_0123456789ab",
		"allowedCapabilities": []map[string]string{{"namespace": "docs", "action": "read", "resource": "/project/sub/*"}},
		"maxBudgetMicrocents": 0,
	}}, &att)

	v, err := dct.NewVerifier(dct.Options{Roots: []string{root.DID()}})
	if err != nil {
		t.Fatal(err)
	}
	scope, err := v.Verify(m.Token, dct.Request{Namespace: "docs", Action: "read", Resource: "/project/a/b"})
	if err != nil {
		t.Fatalf("JavaScript root token: %v", err)
	}
	if scope.RemainingBudgetMicrocents != 5000 || scope.Delegatee != a.ID() {
		t.Errorf("scope %+v", scope)
	}
	// The attenuation set a real zero budget: everything is over budget.
	_, err = v.Verify(att.Token, dct.Request{Namespace: "docs", Action: "read", Resource: "/project/sub/x"})
	if !isDenial(err, dct.BudgetExceeded) {
		t.Errorf("zero-budget attenuation: got %v, want budget_exceeded", err)
	}
	tok, err := dct.Parse(att.Token)
	if err != nil {
		t.Fatal(err)
	}
	var r jsVerify
	js(t, map[string]any{"op": "verify", "token": att.Token}, &r)
	if !equal(tok.RevocationIDs(), r.RevocationIDs) {
		t.Errorf("revocation IDs differ:\n go %v\n js %v", tok.RevocationIDs(), r.RevocationIDs)
	}
}

func TestRevocationEntriesBothWays(t *testing.T) {
	k := key(t, 5)
	id := goChain(t)[1].RevocationIDs()[1]
	e, err := revocation.NewEntry(k, id, revocation.ScopeChain, at)
	if err != nil {
		t.Fatal(err)
	}
	var ok struct{ OK bool }
	js(t, map[string]any{"op": "verifyRevocation", "entry": e}, &ok)
	if !ok.OK {
		t.Error("JavaScript rejects a Go revocation entry")
	}
	var r struct{ Entry revocation.Entry }
	js(t, map[string]any{"op": "revoke", "seed": seedHex(5), "revocationId": id, "revokedAt": timestamp.Format(at), "scope": "block"}, &r)
	if err := r.Entry.Verify(); err != nil {
		t.Errorf("Go rejects a JavaScript revocation entry: %v", err)
	}
	r.Entry.Scope = revocation.ScopeChain
	if err := r.Entry.Verify(); err == nil {
		t.Error("a JavaScript entry with its scope changed still verifies")
	}
}

func authorityJSON(t *testing.T, a dct.Authority) map[string]any {
	m := toMap(t, a)
	delete(m, "issuer")
	return m
}

func attenuationJSON(t *testing.T, a dct.Attenuation) map[string]any {
	m := toMap(t, a)
	delete(m, "attenuator")
	return m
}

func toMap(t *testing.T, v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func isDenial(err error, typ dct.DenialType) bool {
	d, ok := err.(*dct.Denial)
	return ok && d.Type == typ
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
