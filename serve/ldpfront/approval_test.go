package ldpfront

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/identity"
)

func testApprover(t testing.TB, seed byte) *identity.Keypair {
	t.Helper()
	k, err := identity.FromSeed(bytes.Repeat([]byte{seed}, 32), "k")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestApprovalAnswer: an answer counts when an approver signed it for a
// waiting task within a minute of the clock, once, and never from the
// task's initiator; each refusal has its status.
func TestApprovalAnswer(t *testing.T) {
	approver, initiator, stranger := testApprover(t, 1), testApprover(t, 2), testApprover(t, 3)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	a := &approvals{approvers: []string{approver.ID(), initiator.ID()}, now: func() time.Time { return now }}
	id, w, ok := a.add("", "", []string{initiator.ID()})
	if !ok {
		t.Fatal("not held")
	}
	answer := func(k *identity.Keypair, id string, at time.Time, edit func([]byte) []byte) (int, string) {
		ap := &Approval{ApprovalID: id, Approve: true}
		if err := ap.Sign(k.PrivateKey(), at); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(ap)
		if edit != nil {
			b = edit(b)
		}
		_, err := a.answer(b)
		if err == nil {
			return http.StatusOK, ""
		}
		var ae *approvalError
		if !errors.As(err, &ae) {
			t.Fatalf("not an approvalError: %v", err)
		}
		return ae.status, ae.msg
	}
	for _, c := range []struct {
		name   string
		key    *identity.Keypair
		id     string
		at     time.Time
		edit   func([]byte) []byte
		status int
	}{
		{"a stranger", stranger, id, now, nil, http.StatusForbidden},
		{"the initiator", initiator, id, now, nil, http.StatusForbidden},
		{"stale", approver, id, now.Add(-2 * time.Minute), nil, http.StatusUnauthorized},
		{"ahead", approver, id, now.Add(2 * time.Minute), nil, http.StatusUnauthorized},
		{"tampered", approver, id, now, func(b []byte) []byte { return bytes.Replace(b, []byte(`"approve":true`), []byte(`"approve":false`), 1) }, http.StatusUnauthorized},
		{"unknown member", approver, id, now, func(b []byte) []byte { return bytes.Replace(b, []byte(`{`), []byte(`{"x":1,`), 1) }, http.StatusBadRequest},
		{"another task", approver, ApprovalIDPrefix + strings.Repeat("0", 32), now, nil, http.StatusNotFound},
	} {
		if status, msg := answer(c.key, c.id, c.at, c.edit); status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, status, msg, c.status)
		}
	}
	select {
	case <-w.answer:
		t.Fatal("a refused answer decided the task")
	default:
	}
	if status, msg := answer(approver, id, now, nil); status != http.StatusOK || !(<-w.answer).Approve {
		t.Fatalf("the approver: %d %s", status, msg)
	}
	if status, _ := answer(approver, id, now, nil); status != http.StatusNotFound {
		t.Fatalf("again: %d", status)
	}
}

// FuzzApprovalAnswer: no body makes the approvals panic or decide a task
// without an approver's signature.
func FuzzApprovalAnswer(f *testing.F) {
	approver := testApprover(f, 1)
	ap := &Approval{ApprovalID: ApprovalIDPrefix + strings.Repeat("a", 32), Approve: true}
	ap.Sign(approver.PrivateKey(), time.Now())
	b, _ := json.Marshal(ap)
	f.Add(b)
	f.Add([]byte(`{"approval_id":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a := &approvals{approvers: []string{approver.ID()}, now: time.Now}
		a.add("", "", nil)
		if got, err := a.answer(data); err == nil && got.verify() != nil {
			t.Fatal("an unsigned answer was taken")
		}
	})
}

// TestApprovalsBounded: one delegation tree holds at most
// maxWaitingPerTree places, whatever keys its tasks come from (rtldp3 #7:
// counted per key, a holder multiplied them); other trees still get
// theirs; without a tree, the initiator's key is the share.
func TestApprovalsBounded(t *testing.T) {
	a := &approvals{now: time.Now}
	for i := range maxWaitingPerTree {
		if _, _, ok := a.add("", "dct:root", []string{fmt.Sprintf("key-%d", i)}); !ok {
			t.Fatalf("place %d refused", i)
		}
	}
	if _, _, ok := a.add("", "dct:root", []string{"fresh-key"}); ok {
		t.Fatal("a tree's fresh key took more places than the tree's share")
	}
	if _, _, ok := a.add("", "dct:other", []string{"key-0"}); !ok {
		t.Fatal("another tree was refused")
	}
	for range maxWaitingPerTree {
		a.add("", "", []string{"hog"})
	}
	if _, _, ok := a.add("", "", []string{"hog"}); ok {
		t.Fatal("one initiator without a tree took more places than its share")
	}
}
