package revdist

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/sig"
	"github.com/delegateos/delegateos/revocation"
)

var testTime = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func testKey(t testing.TB, n byte) *identity.Keypair {
	t.Helper()
	k, err := identity.FromSeed(bytes.Repeat([]byte{n}, 32), fmt.Sprintf("key%d", n))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testID(s string) string {
	d := sig.Digest([]byte(s))
	return b64.Encode(d[:])
}

func testEntry(t testing.TB, k *identity.Keypair, block string) revocation.Entry {
	t.Helper()
	e, err := revocation.NewEntry(k, testID(block), revocation.ScopeChain, testTime)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func principals(t testing.TB, ks ...*identity.Keypair) Principals {
	t.Helper()
	var ids []string
	for _, k := range ks {
		ids = append(ids, k.ID())
	}
	p, err := NewPrincipals(ids...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// node is a Distributor on a MemStore served by an httptest.Server.
type node struct {
	*Distributor
	store *MemStore
	srv   *httptest.Server
}

func newNode(t *testing.T, auth Authority, peers ...string) *node {
	t.Helper()
	n := &node{store: NewMemStore()}
	n.Distributor = &Distributor{Store: n.store, Authority: auth, Peers: peers, Logf: t.Logf}
	mux := http.NewServeMux()
	mux.Handle(Path, n.Distributor)
	n.srv = httptest.NewServer(mux)
	t.Cleanup(n.srv.Close)
	return n
}

func (n *node) has(e revocation.Entry) bool {
	for _, x := range n.store.List.Entries() {
		if x == e {
			return true
		}
	}
	return false
}

// waitFor polls cond until it holds, failing after a generous deadline;
// it is a wait for an event, not a measurement.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func pushBody(t testing.TB, id any, entry any) string {
	t.Helper()
	m := map[string]any{"jsonrpc": "2.0", "method": MethodRevoke, "params": map[string]any{"revocation": entry}}
	if id != nil {
		m["id"] = id
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func post(t testing.TB, url, contentType, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url, contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp, b.String()
}
