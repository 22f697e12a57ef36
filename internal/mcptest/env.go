package mcptest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/sig"
)

// ContractID is the contract every token Mint issues is bound to.
const ContractID = "ct_e2e0000001"

// Env is one test's world: a directory, a trusted root, the agent the root
// delegates to, and a fresh copy of the documents the docserver serves.
type Env struct {
	t testing.TB
	// Dir is the test's directory: policies, tokens and logs go there.
	Dir string
	// Root is the trusted root; Agent is who Mint's tokens are issued to.
	Root, Agent *identity.Keypair
	// Docs is the docserver's --root: a copy of FixtureDir.
	Docs string
}

// NewEnv makes a new Env in a temporary directory of t.
func NewEnv(t testing.TB) *Env {
	t.Helper()
	dir := t.TempDir()
	return &Env{t: t, Dir: dir, Root: NewKey(t, "root"), Agent: NewKey(t, "agent"),
		Docs: CopyFixture(t, filepath.Join(dir, "docs"))}
}

// NewKey generates a key pair named name.
func NewKey(t testing.TB, name string) *identity.Keypair {
	t.Helper()
	k, err := identity.Generate(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// KeyFile saves k in e.Dir for the CLI and returns its path.
func (e *Env) KeyFile(k *identity.Keypair) string {
	e.t.Helper()
	path := filepath.Join(e.Dir, k.Name()+".key")
	if err := identity.SaveKeyFile(path, k); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// NewDelegationID returns a random delegation ID.
func NewDelegationID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "del_" + hex.EncodeToString(b[:])
}

// Caps parses capabilities written namespace:action:resource.
func Caps(t testing.TB, specs ...string) []dct.Capability {
	t.Helper()
	out := make([]dct.Capability, 0, len(specs))
	for _, s := range specs {
		c, err := dct.ParseCapability(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// Mint issues a root token from e.Root to e.Agent for the capabilities
// capSpecs, under ContractID, with a budget of 1,000,000 microcents, for
// one hour, depth 2; mod, if not nil, may change any of it.
func (e *Env) Mint(mod func(*dct.CreateParams), capSpecs ...string) *dct.Token {
	e.t.Helper()
	p := dct.CreateParams{
		Issuer:              e.Root,
		Delegatee:           e.Agent.ID(),
		Capabilities:        Caps(e.t, capSpecs...),
		ContractID:          ContractID,
		DelegationID:        NewDelegationID(),
		MaxChainDepth:       2,
		MaxBudgetMicrocents: 1_000_000,
		ExpiresAt:           time.Now().Add(time.Hour),
	}
	if mod != nil {
		mod(&p)
	}
	tok, err := dct.Create(p)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// Budget is a Mint modifier that sets the budget to n microcents.
func Budget(n int64) func(*dct.CreateParams) {
	return func(p *dct.CreateParams) { p.MaxBudgetMicrocents = n }
}

// Attenuate narrows parent, held by from, for to, with budget and, if any
// are given, the capabilities capSpecs.
func Attenuate(t testing.TB, parent *dct.Token, from, to *identity.Keypair, budget int64, capSpecs ...string) *dct.Token {
	t.Helper()
	p := dct.AttenuateParams{Attenuator: from, Delegatee: to.ID(), DelegationID: NewDelegationID(), MaxBudgetMicrocents: &budget}
	if len(capSpecs) > 0 {
		c := Caps(t, capSpecs...)
		p.Capabilities = &c
	}
	tok, err := dct.Attenuate(parent, p)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Serialize encodes a hand-built token the way the protocol does: base64url
// of its canonical JSON (DelegateOS §3.2). Nothing checks it: that is the
// point of building one by hand.
func Serialize(t testing.TB, st dct.SignedToken) string {
	t.Helper()
	b, err := canon.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return b64.Encode(b)
}

// SignAttenuation signs attenuation i of st with k, as §3.4 defines the
// payload: canonical {attenuations[0..i], authority}.
func SignAttenuation(t testing.TB, st *dct.SignedToken, i int, k *identity.Keypair) dct.Signature {
	t.Helper()
	payload := struct {
		Attenuations []dct.Attenuation `json:"attenuations"`
		Authority    dct.Authority     `json:"authority"`
	}{st.Attenuations[:i+1], st.Authority}
	s, err := sig.Sign(k.PrivateKey(), payload)
	if err != nil {
		t.Fatal(err)
	}
	return dct.Signature{Signer: k.ID(), Signature: s, Covers: dct.Covers(i)}
}

// WriteFile writes content to path, readable by its owner only.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
