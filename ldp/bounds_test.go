package ldp

import (
	"strings"
	"testing"
	"time"
)

// The red team's attacks on LDP (issue 21) that held, or that broke and
// were fixed: each says what was tried.

// TestOnePeerCannotFillReplayStore (red team, issue 21; broke before
// MemoryReplay.MaxPerSigner): one admitted peer that sends cheap messages
// in its own session (TASK_CANCEL of no task: each spends a message ID and
// a nonce) filled the store, whose bound was only global, and then every
// envelope of every other peer was refused replay_store_busy for the
// window (through the binary, 50,000 cancels took 30 s:
// TestLDPAttackReplayStoreFlood). Now the hog is refused at its share,
// and the other peer opens its session.
func TestOnePeerCannotFillReplayStore(t *testing.T) {
	d := newDelegate(t, 1, "")
	d.resp.Verifier.Replay = &MemoryReplay{Max: 40}
	hog := newClient(2)
	s, err := hog.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{}, nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		reply, err := s.Send(ctx, &TaskCancel{TaskID: "none"})
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := reply.Body.(*TaskFailed); ok && f.Error.Code != CodeTaskUnknown || i > 100 {
			break
		}
	}
	other := newClient(3)
	other.ID = "ldp:delegate:other"
	if n := d.resp.Verifier.Replay.(*MemoryReplay).Len(); n > 5 {
		t.Fatalf("the hog holds %d places of 40, more than its share of 5", n)
	}
	if _, err := other.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{}, nil, "", ""); err != nil {
		t.Fatalf("another peer is refused after one peer's cancels: %v", err)
	}
}

// TestReplayBoundPerSigner: a signer's share of the store is counted per
// signer, and given back when its keys expire.
func TestReplayBoundPerSigner(t *testing.T) {
	m := &MemoryReplay{Max: 100, MaxPerSigner: 4}
	now := t0
	exp := now.Add(time.Minute)
	key := func(signer, id string) []string {
		return []string{"ed25519\x00" + signer + "\x00message_id\x00" + id, "ed25519\x00" + signer + "\x00nonce\x00" + id}
	}
	for _, id := range []string{"a", "b"} {
		if err := m.Spend(ctx, key("A", id), now, exp); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Spend(ctx, key("A", "c"), now, exp); err == nil {
		t.Fatal("A spent past its share")
	}
	if err := m.Spend(ctx, key("B", "a"), now, exp); err != nil {
		t.Fatalf("B is refused for A's spending: %v", err)
	}
	if err := m.Spend(ctx, key("A", "c"), exp, exp.Add(time.Minute)); err != nil {
		t.Fatalf("A after its keys expired: %v", err)
	}
}

// TestOnePeerCannotFillSessions (red team, issue 21; broke before
// Sessions.MaxPerPeer): the session table's bound was only global, so one
// admitted peer (one key) took every place, and every other peer's
// SESSION_PROPOSE was refused SESSIONS_FULL until those sessions expired
// (up to 24 hours: ttl_secs is the peer's choice). Now a peer holds at
// most MaxPerPeer (64 by default; 2 here).
func TestOnePeerCannotFillSessions(t *testing.T) {
	d := newDelegate(t, 1, "")
	d.resp.Sessions = &Sessions{Max: 16, MaxPerPeer: 2}
	hog := newClient(2)
	opened := 0
	for range 16 {
		if _, err := hog.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{TTLSecs: ptr(uint64(86400))}, nil, "", ""); err != nil {
			if !strings.Contains(err.Error(), CodeSessionsFull) {
				t.Fatal(err)
			}
			break
		}
		opened++
	}
	if opened != 2 {
		t.Fatalf("one peer opened %d sessions of 16, want its share of 2", opened)
	}
	other := newClient(3)
	other.ID = "ldp:delegate:other"
	if _, err := other.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{}, nil, "", ""); err != nil {
		t.Fatalf("another peer cannot open a session after one peer opened many: %v", err)
	}
}

// TestReplayBoundPerTree: keys spent in a share (a delegation tree) are
// counted there, whatever key signed them (rtldp3 #12: a holder's keys
// multiplied its shares); a replay is still told by the key, and the share
// is given back when its keys expire.
func TestReplayBoundPerTree(t *testing.T) {
	m := &MemoryReplay{Max: 100, MaxPerSigner: 4}
	now := t0
	exp := now.Add(time.Minute)
	key := func(signer, id string) []string {
		return []string{"ed25519\x00" + signer + "\x00message_id\x00" + id, "ed25519\x00" + signer + "\x00nonce\x00" + id}
	}
	if err := m.SpendShared(ctx, "dct:a", key("A1", "x"), now, exp); err != nil {
		t.Fatal(err)
	}
	if err := m.SpendShared(ctx, "dct:a", key("A1", "x"), now, exp); err == nil {
		t.Fatal("a replay in the same share was taken")
	}
	if err := m.SpendShared(ctx, "dct:a", key("A2", "x"), now, exp); err != nil {
		t.Fatal(err)
	}
	if err := m.SpendShared(ctx, "dct:a", key("A3", "x"), now, exp); err == nil {
		t.Fatal("a fresh key of a full tree spent past the tree's share")
	}
	if err := m.SpendShared(ctx, "dct:b", key("B", "x"), now, exp); err != nil {
		t.Fatalf("another tree is refused for one tree's spending: %v", err)
	}
	if err := m.SpendShared(ctx, "dct:a", key("A3", "x"), exp, exp.Add(time.Minute)); err != nil {
		t.Fatalf("the tree after its keys expired: %v", err)
	}
}
