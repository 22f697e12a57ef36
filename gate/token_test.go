package gate

import (
	"errors"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
)

// VerifyToken verifies a token without its delegations' status;
// CheckToken also refuses one whose chain passes through an ended
// delegation; a gate without roots verifies nothing.
func TestCheckToken(t *testing.T) {
	g, token := benchGate(t)
	if scope, err := g.VerifyToken(token); err != nil || scope.DelegationID != "del_bench" {
		t.Fatalf("VerifyToken: %v %v", scope, err)
	}
	if err := g.CheckToken(token); err != nil {
		t.Fatalf("CheckToken: %v", err)
	}
	if err := g.CheckToken("not a token"); err == nil {
		t.Error("CheckToken took a malformed token")
	}
	g.Ended = func(l dct.ChainLink) (string, bool) { return "completed", true }
	if _, err := g.VerifyToken(token); err != nil {
		t.Errorf("VerifyToken of an ended delegation's token: %v", err)
	}
	if err := g.CheckToken(token); err == nil || !strings.Contains(err.Error(), "has ended (completed)") {
		t.Errorf("CheckToken of an ended delegation's token: %v", err)
	}
	g.Verifier = nil
	if _, err := g.VerifyToken(token); !errors.Is(err, ErrNoRoots) {
		t.Errorf("VerifyToken without roots: %v", err)
	}
	if err := g.CheckToken(token); !errors.Is(err, ErrNoRoots) {
		t.Errorf("CheckToken without roots: %v", err)
	}
}
