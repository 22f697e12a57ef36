package revdist

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/delegateos/delegateos/revocation"
)

// lateAuthority refuses every entry until it is told to accept them, as
// Tokens refuses an entry for a token the verifier has not yet seen.
type lateAuthority struct{ ok atomic.Bool }

func (a *lateAuthority) Authorize(e revocation.Entry) error {
	if !a.ok.Load() {
		return fmt.Errorf("%w: not yet", ErrNotAuthorized)
	}
	return nil
}

// An entry a poll refused because its revoker was not (yet) accepted is
// read again by the next poll, even when the peer's list has not changed:
// a verifier that sees the revoked token only after its first poll must
// not keep allowing it because the peer answers 304.
func TestRefusedEntryIsPolledAgain(t *testing.T) {
	k := testKey(t, 1)
	peer := newNode(t, principals(t, k))
	e := testEntry(t, k, "block")
	if _, err := peer.Add(e); err != nil {
		t.Fatal(err)
	}
	auth := &lateAuthority{}
	a := newNode(t, auth, peer.srv.URL)
	a.PollPeers(context.Background())
	if a.has(e) {
		t.Fatal("an entry the authority refused was merged")
	}
	auth.ok.Store(true) // the verifier has now seen the token
	a.PollPeers(context.Background())
	a.pushes.Wait() // the merged entry is pushed back to the peer
	if !a.has(e) {
		t.Fatal("the peer's unchanged list was not read again: the entry refused before is still missing")
	}
}
