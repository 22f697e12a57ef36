package serve

import (
	"context"
	"testing"
	"time"
)

func TestByteBudget(t *testing.T) {
	b := newByteBudget(80)
	ctx := context.Background()
	if !b.take(ctx, 50, 0, "") {
		t.Fatal("50 of 80 free")
	}
	// Anonymous requests have an eighth (10) and never wait.
	if b.takeAnonymous(11) || !b.takeAnonymous(10) || b.takeAnonymous(1) {
		t.Fatal("the anonymous share is not 10")
	}
	b.give(10, true, "")
	// A waiter for 40 is granted, in turn, when room is given back; a
	// later small request waits behind it.
	got := make(chan bool)
	go func() { got <- b.take(ctx, 40, time.Hour, "") }()
	for {
		b.mu.Lock()
		n := len(b.waiters)
		b.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if b.takeAnonymous(1) {
		t.Fatal("an anonymous request passed a waiter")
	}
	b.give(50, false, "")
	if !<-got || b.inUse() != 40 {
		t.Fatalf("the waiter: in use %d", b.inUse())
	}
	// One that cannot get room in time is refused, and takes nothing.
	if b.take(ctx, 41, time.Millisecond, "") || b.inUse() != 40 {
		t.Fatalf("41 more of 80 with 40 in use: in use %d", b.inUse())
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if b.take(cancelled, 80, time.Hour, "") || b.inUse() != 40 || len(b.waiters) != 0 {
		t.Fatal("a cancelled request took room or kept its place")
	}
}

// One credential holds at most a quarter of the budget, refused at once
// beyond it; others keep the rest, and a share given back is taken again.
func TestBudgetCredentialShare(t *testing.T) {
	b := newByteBudget(100)
	ctx := context.Background()
	if !b.take(ctx, 25, 0, "alice") || b.take(ctx, 1, time.Hour, "alice") {
		t.Fatal("a credential's share is not bounded to a quarter")
	}
	if !b.take(ctx, 25, 0, "bob") || b.inUse() != 50 {
		t.Fatal("another credential was refused")
	}
	b.give(25, false, "alice")
	if !b.take(ctx, 25, 0, "alice") || len(b.byCred) != 2 {
		t.Fatal("a share given back was not taken again")
	}
	b.give(25, false, "alice")
	b.give(25, false, "bob")
	if len(b.byCred) != 0 || b.inUse() != 0 {
		t.Fatalf("shares left after all were given back: %v", b.byCred)
	}
}
