package main

import (
	"errors"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/serve/ldpfront"
)

// serve speaks LDP (docs/ldp.md) when the policy has an ldp section.
func init() {
	serveExtensions = append(serveExtensions, serveExtension{mount: mountLDP})
}

func mountLDP(s *serveSetup) error {
	if s.Policy.LDP == nil {
		return nil
	}
	var k *identity.Keypair
	if s.KeyFile != "" {
		var err error
		if k, err = identity.LoadKeyFile(s.KeyFile); err != nil {
			return inputError{err}
		}
	}
	// With an audit log, the relays hand their receipts through a tap
	// that notes the tasks' own, for their provenance (mount runs before
	// any session is opened).
	// Without one, a tap that keeps nothing still notes whether the gate
	// allowed each task's call (an upstream's error shaped as a denial is
	// then the tool's failure, not a refusal).
	var tap *ldpfront.Tap
	if l, ok := s.Evidence.(ldpfront.AuditLog); ok && l != nil {
		tap = ldpfront.NewTap(l)
		s.Evidence = tap
	} else if s.Evidence == nil {
		tap = ldpfront.NewTap(nil)
		s.Evidence = tap
	}
	f, err := ldpfront.New(ldpfront.Options{Policy: s.Policy, Key: k, MCP: s.Server.Mux, Endpoint: s.Endpoint,
		Guard: s.Server.Guard, TLS: s.TLS, CheckToken: s.CheckToken, Gates: s.Gates, ReadBody: s.Server.ReadBody,
		Receipts: tap, RequireSignature: s.Options.AuthorizeVerifiesSignatures, Log: s.Log})
	var se *ldpfront.SettingError
	switch {
	case errors.As(err, &se):
		return fixf("%s", se.Msg)
	case err != nil:
		return inputError{err}
	}
	if s.Reload != nil {
		// The card (costs, quality hints) and the contract budgets follow
		// a reloaded policy; a changed ldp section is refused (gate's
		// fixedSettings), so the section is the one mounted.
		s.Reload.onApplied(func(snap *gate.Snapshot) { f.Refresh(snap.Policy) })
	}
	if len(s.Policy.LDP.Approvers) > 0 {
		// The approvers answer every held call, whichever front sends
		// it: an MCP client holding the same token must not approve its
		// own call of a tool held for them.
		s.ApprovalElsewhere = ldpfront.ApprovalElsewhere
	}
	f.Mount(s.Server.Mux)
	return nil
}

// ldpLabels are the agent card's ldp.* labels (nil without an ldp section).
func ldpLabels(pol *policy.Policy, k *identity.Keypair) map[string]string {
	return ldpfront.Labels(pol, k)
}
