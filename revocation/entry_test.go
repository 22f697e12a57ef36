package revocation

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/canon"
)

func TestNewEntryVerifies(t *testing.T) {
	k := testKey(t, 1)
	id := testID("block")
	for _, scope := range []Scope{ScopeBlock, ScopeChain} {
		e := testEntry(t, k, id, scope)
		if err := e.Verify(); err != nil {
			t.Fatalf("%s: %v", scope, err)
		}
		want := Entry{RevocationID: id, RevokedBy: k.ID(), RevokedAt: "2026-01-02T03:04:05.678Z", Scope: scope, Signature: e.Signature}
		if e != want {
			t.Errorf("got %+v, want %+v", e, want)
		}
	}
}

func TestNewEntryZeroTimeIsNow(t *testing.T) {
	before := time.Now().Truncate(time.Millisecond)
	e, err := NewEntry(testKey(t, 1), testID("x"), ScopeChain, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse(time.RFC3339Nano, e.RevokedAt)
	if err != nil || at.Before(before) || at.After(time.Now()) {
		t.Errorf("revokedAt %s is not now (%v)", e.RevokedAt, err)
	}
}

func TestNewEntryRefuses(t *testing.T) {
	k := testKey(t, 1)
	tests := []struct {
		name  string
		id    string
		scope Scope
	}{
		{"empty id", "", ScopeChain},
		{"short id", testID("x")[:42], ScopeChain},
		{"not base64url", strings.Repeat("+", 43), ScopeChain},
		{"empty scope", testID("x"), ""},
		{"unknown scope", testID("x"), "all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewEntry(k, tt.id, tt.scope, testTime); !errors.Is(err, ErrMalformedEntry) {
				t.Errorf("got %v, want ErrMalformedEntry", err)
			}
		})
	}
	if _, err := NewEntry(nil, testID("x"), ScopeChain, testTime); err == nil {
		t.Error("nil key: want error")
	}
}

// Every signed field and the signature itself, changed in turn, must make
// Verify fail.
func TestEntryTampered(t *testing.T) {
	k, other := testKey(t, 1), testKey(t, 2)
	orig := testEntry(t, k, testID("block"), ScopeBlock)
	otherSig := testEntry(t, k, testID("another block"), ScopeBlock).Signature
	flipped := []byte(orig.Signature)
	if flipped[10] == 'A' {
		flipped[10] = 'B'
	} else {
		flipped[10] = 'A'
	}
	tests := []struct {
		name   string
		change func(*Entry)
	}{
		{"revocationId", func(e *Entry) { e.RevocationID = testID("other") }},
		{"revokedBy", func(e *Entry) { e.RevokedBy = other.ID() }},
		{"revokedAt", func(e *Entry) { e.RevokedAt = "2026-01-02T03:04:05.679Z" }},
		// The same instant written differently is different signed bytes.
		{"revokedAt same instant", func(e *Entry) { e.RevokedAt = "2026-01-02T03:04:05.678+00:00" }},
		{"scope", func(e *Entry) { e.Scope = ScopeChain }},
		{"signature bit", func(e *Entry) { e.Signature = string(flipped) }},
		{"signature of another entry", func(e *Entry) { e.Signature = otherSig }},
		{"signed by another key", func(e *Entry) {
			e.Signature = testEntry(t, other, e.RevocationID, e.Scope).Signature
		}},
		{"claims another key", func(e *Entry) {
			*e = testEntry(t, other, e.RevocationID, e.Scope)
			e.RevokedBy = k.ID()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := orig
			tt.change(&e)
			if e == orig {
				t.Fatal("the change changed nothing")
			}
			if err := e.Verify(); !errors.Is(err, ErrInvalidSignature) {
				t.Errorf("got %v, want ErrInvalidSignature", err)
			}
		})
	}
}

func TestEntryMalformed(t *testing.T) {
	good := testEntry(t, testKey(t, 1), testID("block"), ScopeChain)
	tests := []struct {
		name   string
		change func(*Entry)
	}{
		{"empty revocationId", func(e *Entry) { e.RevocationID = "" }},
		{"revocationId 42 chars", func(e *Entry) { e.RevocationID = e.RevocationID[:42] }},
		{"revocationId 44 chars", func(e *Entry) { e.RevocationID += "A" }},
		{"revocationId padded", func(e *Entry) { e.RevocationID = e.RevocationID[:42] + "=" }},
		{"revocationId std alphabet", func(e *Entry) { e.RevocationID = "/" + e.RevocationID[1:] }},
		{"revocationId trailing bits", func(e *Entry) { e.RevocationID = e.RevocationID[:42] + "B" }},
		{"empty revokedBy", func(e *Entry) { e.RevokedBy = "" }},
		{"revokedBy did:key", func(e *Entry) { e.RevokedBy = testKey(t, 1).DID() }},
		{"revokedBy short", func(e *Entry) { e.RevokedBy = e.RevokedBy[:40] }},
		{"empty revokedAt", func(e *Entry) { e.RevokedAt = "" }},
		{"revokedAt not a time", func(e *Entry) { e.RevokedAt = "yesterday" }},
		{"revokedAt date only", func(e *Entry) { e.RevokedAt = "2026-01-02" }},
		{"revokedAt too long", func(e *Entry) { e.RevokedAt = "2026-01-02T03:04:05." + strings.Repeat("1", 60) + "Z" }},
		{"empty scope", func(e *Entry) { e.Scope = "" }},
		{"scope case", func(e *Entry) { e.Scope = "Chain" }},
		{"scope unknown", func(e *Entry) { e.Scope = "all" }},
		{"empty signature", func(e *Entry) { e.Signature = "" }},
		{"signature not base64url", func(e *Entry) { e.Signature = "!" + e.Signature[1:] }},
		{"signature short", func(e *Entry) { e.Signature = e.Signature[:80] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := good
			tt.change(&e)
			if err := e.Verify(); !errors.Is(err, ErrMalformedEntry) {
				t.Errorf("got %v, want ErrMalformedEntry", err)
			}
		})
	}
}

// A revokedAt from another implementation need not be in our canonical
// form; it is signed as written.
func TestEntryForeignTimestamp(t *testing.T) {
	k := testKey(t, 1)
	e := Entry{RevocationID: testID("b"), RevokedBy: k.ID(), RevokedAt: "2026-01-02T04:04:05+01:00", Scope: ScopeChain}
	s, err := canon.Marshal(map[string]string{"revocationId": e.RevocationID, "revokedBy": e.RevokedBy, "revokedAt": e.RevokedAt, "scope": string(e.Scope)})
	if err != nil {
		t.Fatal(err)
	}
	e.Signature = signBytes(k, s)
	if err := e.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestSignedPayloadIsCanonical(t *testing.T) {
	entries := []Entry{
		testEntry(t, testKey(t, 1), testID("a"), ScopeChain),
		{RevocationID: "x", RevokedBy: "y", RevokedAt: "z", Scope: "block"},
		{RevocationID: "\"quote\\ \x01\n\t", RevokedBy: "é€😀", RevokedAt: "<&>\u2028", Scope: "\x7f"},
		{},
	}
	for _, e := range entries {
		want, err := canon.Marshal(map[string]string{
			"revocationId": e.RevocationID, "revokedBy": e.RevokedBy, "revokedAt": e.RevokedAt, "scope": string(e.Scope),
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := e.signedPayload(); !bytes.Equal(got, want) {
			t.Errorf("payload\n got %s\nwant %s", got, want)
		}
	}
}
