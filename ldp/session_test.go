package ldp

import (
	"errors"
	"regexp"
	"testing"
	"time"
)

func sessionCode(err error) string {
	var se *SessionError
	if errors.As(err, &se) {
		return se.Code
	}
	return ""
}

func TestSessionLifecycle(t *testing.T) {
	now := t0
	tab := &Sessions{Now: func() time.Time { return now }}
	p := Negotiate(DefaultPreferredModes, []PayloadMode{ModeSemanticFrame, ModeText})
	s, err := tab.Open("ldp:delegate:a", Verified{}, nil, "", p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != StateActive || s.TTL != DefaultTTL || !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(s.ID) {
		t.Fatalf("%+v", s)
	}
	if _, err := tab.Use(s.ID, "ldp:delegate:a", ModeSemanticFrame); err != nil {
		t.Fatal(err)
	}
	// Another peer cannot use, suspend or close it: to it the session does not exist.
	for _, f := range []func() error{
		func() error { _, err := tab.Use(s.ID, "ldp:delegate:b", ModeText); return err },
		func() error { _, err := tab.Suspend(s.ID, "ldp:delegate:b"); return err },
		func() error { _, err := tab.Close(s.ID, "ldp:delegate:b", "x"); return err },
	} {
		if c := sessionCode(f()); c != CodeSessionUnknown {
			t.Fatalf("another peer: %s", c)
		}
	}
	if _, err := tab.Use("nope", "ldp:delegate:a", ModeText); sessionCode(err) != CodeSessionUnknown {
		t.Fatal(err)
	}
	if _, err := tab.Use(s.ID, "ldp:delegate:a", ModeSemanticGraph); sessionCode(err) != CodePayloadMode {
		t.Fatalf("unnegotiated mode: %v", err)
	}
	// Suspended: tasks refused; resume makes it active again.
	if s, err = tab.Suspend(s.ID, "ldp:delegate:a"); err != nil || s.State != StateSuspended {
		t.Fatal(s, err)
	}
	if _, err := tab.Use(s.ID, "ldp:delegate:a", ModeText); sessionCode(err) != CodeSessionSuspended {
		t.Fatalf("suspended: %v", err)
	}
	if _, err := tab.Suspend(s.ID, "ldp:delegate:a"); sessionCode(err) != CodeSessionState {
		t.Fatalf("suspend twice: %v", err)
	}
	if s, err = tab.Resume(s.ID, "ldp:delegate:a"); err != nil || s.State != StateActive {
		t.Fatal(s, err)
	}
	if _, err := tab.Resume(s.ID, "ldp:delegate:a"); sessionCode(err) != CodeSessionState {
		t.Fatalf("resume an active session: %v", err)
	}
	// Fallback (§4.3): the session continues in text.
	if s, err = tab.FallBack(s.ID, "ldp:delegate:a", ModeSemanticFrame); err != nil || s.Payload.Mode != ModeText {
		t.Fatal(s, err)
	}
	if _, err := tab.Use(s.ID, "ldp:delegate:a", ModeSemanticFrame); sessionCode(err) != CodePayloadMode {
		t.Fatalf("frame after fallback: %v", err)
	}
	// A second failure report for the old mode leaves the session as it is.
	if s, err = tab.FallBack(s.ID, "ldp:delegate:a", ModeSemanticFrame); err != nil || s.State != StateActive {
		t.Fatal(s, err)
	}
	if _, err = tab.FallBack(s.ID, "ldp:delegate:a", ModeText); !errors.Is(err, ErrNoFallback) {
		t.Fatalf("no fallback left: %v", err)
	}
	if s, _ = tab.Get(s.ID); s.State != StateActive || s.Tasks != 1 {
		t.Fatalf("a failed fallback closed the session: %+v", s)
	}
	if s, err = tab.Close(s.ID, "ldp:delegate:a", "done"); err != nil || s.State != StateClosed {
		t.Fatal(s, err)
	}
	if _, err := tab.Use(s.ID, "ldp:delegate:a", ModeText); sessionCode(err) != CodeSessionClosed {
		t.Fatalf("closed: %v", err)
	}
	if _, err := tab.Resume(s.ID, "ldp:delegate:a"); sessionCode(err) != CodeSessionClosed {
		t.Fatalf("resume closed: %v", err)
	}
}

// TestSessionTTL: the TTL counts inactivity (§5.4); every use restarts it;
// a suspended session expires too.
func TestSessionTTL(t *testing.T) {
	now := t0
	tab := &Sessions{Now: func() time.Time { return now }}
	s, _ := tab.Open("a", Verified{}, nil, "", Negotiate(nil, nil), 10*time.Second)
	now = now.Add(9 * time.Second)
	if _, err := tab.Use(s.ID, "a", ModeText); err != nil {
		t.Fatal(err)
	}
	now = now.Add(9 * time.Second) // 18 s after opening, 9 after the last use
	if _, err := tab.Touch(s.ID, "a"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(10 * time.Second)
	if _, err := tab.Use(s.ID, "a", ModeText); sessionCode(err) != CodeSessionExpired {
		t.Fatalf("expired: %v", err)
	}
	if g, _ := tab.Get(s.ID); g.State != StateClosed || g.CloseReason != "expired" {
		t.Fatalf("%+v", g)
	}
	s2, _ := tab.Open("a", Verified{}, nil, "", Negotiate(nil, nil), 10*time.Second)
	tab.Suspend(s2.ID, "a")
	now = now.Add(10 * time.Second)
	if _, err := tab.Resume(s2.ID, "a"); sessionCode(err) != CodeSessionExpired {
		t.Fatalf("resume after expiry: %v", err)
	}
	s3, _ := tab.Open("a", Verified{}, nil, "", Negotiate(nil, nil), 1000*time.Hour)
	if s3.TTL != MaxTTL {
		t.Fatalf("TTL %v, want it cut to %v", s3.TTL, MaxTTL)
	}
}

// TestSessionsFull: the table is bounded; expired and closed sessions make
// room.
func TestSessionsFull(t *testing.T) {
	now := t0
	tab := &Sessions{Max: 2, Now: func() time.Time { return now }}
	a, _ := tab.Open("a", Verified{}, nil, "", Negotiate(nil, nil), time.Minute)
	tab.Open("a", Verified{}, nil, "", Negotiate(nil, nil), time.Hour)
	if _, err := tab.Open("a", Verified{}, nil, "", Negotiate(nil, nil), time.Hour); sessionCode(err) != CodeSessionsFull {
		t.Fatalf("full: %v", err)
	}
	tab.Close(a.ID, "a", "done")
	if _, err := tab.Open("a", Verified{}, nil, "", Negotiate(nil, nil), time.Hour); err != nil {
		t.Fatalf("after a close: %v", err)
	}
	if _, err := tab.Open("a", Verified{}, nil, "", Negotiate(nil, nil), time.Hour); sessionCode(err) != CodeSessionsFull {
		t.Fatalf("full again: %v", err)
	}
}

// TestSessionsPerPeer: one peer (one key) holds at most MaxPerPeer live
// sessions; other peers are not held to its count.
func TestSessionsPerPeer(t *testing.T) {
	now := t0
	tab := &Sessions{MaxPerPeer: 2, Now: func() time.Time { return now }}
	alice := Verified{Algorithm: AlgEd25519, Signer: testDID(1)}
	a1, _ := tab.Open("ldp:delegate:a", alice, nil, "", Negotiate(nil, nil), time.Minute)
	tab.Open("ldp:delegate:a2", alice, nil, "", Negotiate(nil, nil), time.Minute) // another ID, same key
	if _, err := tab.Open("ldp:delegate:a3", alice, nil, "", Negotiate(nil, nil), time.Minute); sessionCode(err) != CodeSessionsFull {
		t.Fatalf("third of one key: %v", err)
	}
	if _, err := tab.Open("ldp:delegate:b", Verified{Algorithm: AlgEd25519, Signer: testDID(2)}, nil, "", Negotiate(nil, nil), time.Minute); err != nil {
		t.Fatalf("another key: %v", err)
	}
	tab.Close(a1.ID, "ldp:delegate:a", "done")
	if _, err := tab.Open("ldp:delegate:a", alice, nil, "", Negotiate(nil, nil), time.Minute); err != nil {
		t.Fatalf("after a close: %v", err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := tab.Open("ldp:delegate:a", alice, nil, "", Negotiate(nil, nil), time.Minute); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

// TestSessionsPerTree: sessions are counted per delegation tree too, whose
// holders may sign with as many keys as they like (rtldp3 #12): a tree at
// its share is refused whatever its keys, and other trees are not held to
// its count.
func TestSessionsPerTree(t *testing.T) {
	now := t0
	tab := &Sessions{MaxPerPeer: 2, MaxPerTree: 3, Now: func() time.Time { return now }}
	for i := range 3 {
		if _, err := tab.Open("ldp:delegate:a", Verified{Algorithm: AlgEd25519, Signer: testDID(byte(10 + i))}, nil, "dct:root-a", Negotiate(nil, nil), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tab.Open("ldp:delegate:a", Verified{Algorithm: AlgEd25519, Signer: testDID(20)}, nil, "dct:root-a", Negotiate(nil, nil), time.Minute); sessionCode(err) != CodeSessionsFull {
		t.Fatalf("a fresh key of a full tree: %v", err)
	}
	if _, err := tab.Open("ldp:delegate:b", Verified{Algorithm: AlgEd25519, Signer: testDID(21)}, nil, "dct:root-b", Negotiate(nil, nil), time.Minute); err != nil {
		t.Fatalf("another tree: %v", err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := tab.Open("ldp:delegate:a", Verified{Algorithm: AlgEd25519, Signer: testDID(20)}, nil, "dct:root-a", Negotiate(nil, nil), time.Minute); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}
