package credential

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/delegateos/delegateos/identity"
)

// TypeReputation is the type of a reputation credential.
const TypeReputation = "ReputationCredential"

// DelegationReceipt is what a receipt for a finished DelegateOS delegation
// states. It is issued in the shape of AVP's DelegationReceipt: the
// delegatee is the subject, the contract's title its purpose and the
// contract's required capabilities its allowed_category scope; the other
// members are this project's and fall under the VC 2.0 context's
// issuer-dependent vocabulary.
type DelegationReceipt struct {
	// Delegator and Delegatee are did:keys.
	Delegator, Delegatee string
	DelegationID         string
	ContractID           string
	AttestationID        string
	// Purpose is the task contract's title.
	Purpose string
	// Categories are the capabilities the contract required.
	Categories []string
	// BudgetMicrocents is the contract's budget, CostMicrocents what the
	// attestation says the work cost.
	BudgetMicrocents, CostMicrocents int64
	// Outcome is how the delegation ended: "completed" or "failed".
	Outcome     string
	CompletedAt time.Time
	// VerificationPassed and VerificationScore are the attested outcome of
	// the contract's output verification, when there is one.
	VerificationPassed *bool
	VerificationScore  *float64
}

// Score is one score of a reputation profile, as read at some time.
type Score struct {
	Name       string
	Score      float64
	Confidence float64
	SampleSize int
	LastSignal time.Time
}

// Reputation is what a reputation credential states: an agent's scores in
// one RDP profile, with decay applied up to At.
type Reputation struct {
	// Agent is the agent's DID.
	Agent     string
	AgentName string
	// Profile is the profile's ID, "reputation:<slug>".
	Profile    string
	At         time.Time
	Dimensions []Score
	Domains    []Score
}

// Window is a credential's validity: from ValidFrom until ValidUntil, both
// written to the second.
type Window struct {
	ValidFrom, ValidUntil time.Time
}

// IssueDelegationReceipt signs a DelegationReceipt with key (the issuer)
// and returns the secured credential.
func IssueDelegationReceipt(key ed25519.PrivateKey, d DelegationReceipt, w Window, rnd io.Reader) ([]byte, error) {
	for _, did := range []string{d.Delegator, d.Delegatee} {
		if _, err := identity.PublicKeyFromDID(did); err != nil {
			return nil, fmt.Errorf("credential: %w", err)
		}
	}
	if d.Outcome != "completed" && d.Outcome != "failed" {
		return nil, fmt.Errorf("credential: outcome %q is neither completed nor failed", d.Outcome)
	}
	if d.BudgetMicrocents < 0 || d.CostMicrocents < 0 {
		return nil, errors.New("credential: budget and cost are not negative")
	}
	scope := make([]any, 0, len(d.Categories))
	for _, c := range d.Categories {
		if c == "" {
			return nil, errors.New("credential: an empty category")
		}
		scope = append(scope, object{"predicate": PredicateAllowedCategory, "value": c})
	}
	subject := object{
		"id":               d.Delegatee,
		"purpose":          d.Purpose,
		"scope":            scope,
		"delegator":        d.Delegator,
		"delegationId":     d.DelegationID,
		"contractId":       d.ContractID,
		"attestationId":    d.AttestationID,
		"budgetMicrocents": d.BudgetMicrocents,
		"costMicrocents":   d.CostMicrocents,
		"outcome":          d.Outcome,
		"completedAt":      FormatTime(d.CompletedAt),
	}
	if d.VerificationPassed != nil {
		subject["verificationPassed"] = *d.VerificationPassed
	}
	if d.VerificationScore != nil {
		s, err := score(*d.VerificationScore)
		if err != nil {
			return nil, err
		}
		subject["verificationScore"] = s
	}
	return issue(key, []any{ContextV2, ContextAVPDelegation}, []any{TypeCredential, TypeAgentDelegation}, subject, w, rnd)
}

// IssueReputation signs a reputation credential with key (the issuer) and
// returns the secured credential.
func IssueReputation(key ed25519.PrivateKey, rep Reputation, w Window, rnd io.Reader) ([]byte, error) {
	if rep.Agent == "" {
		return nil, errors.New("credential: no agent")
	}
	list := func(scores []Score) ([]any, error) {
		out := make([]any, 0, len(scores))
		for _, s := range scores {
			v, err := score(s.Score)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.Name, err)
			}
			c, err := score(s.Confidence)
			if err != nil {
				return nil, fmt.Errorf("%s: confidence: %w", s.Name, err)
			}
			out = append(out, object{"name": s.Name, "score": v, "confidence": c,
				"sampleSize": s.SampleSize, "lastSignal": FormatTime(s.LastSignal)})
		}
		return out, nil
	}
	dims, err := list(rep.Dimensions)
	if err != nil {
		return nil, err
	}
	domains, err := list(rep.Domains)
	if err != nil {
		return nil, err
	}
	subject := object{"id": rep.Agent, "profile": rep.Profile, "scoredAt": FormatTime(rep.At),
		"dimensions": dims, "domains": domains}
	if rep.AgentName != "" && rep.AgentName != rep.Agent {
		subject["name"] = rep.AgentName
	}
	return issue(key, []any{ContextV2}, []any{TypeCredential, TypeReputation}, subject, w, rnd)
}

// score rounds a score in [0, 1] to four decimals, as RDP stores them.
func score(x float64) (float64, error) {
	if math.IsNaN(x) || x < 0 || x > 1 {
		return 0, fmt.Errorf("credential: score %v is not in [0, 1]", x)
	}
	return math.Round(x*1e4) / 1e4, nil
}

// issue builds, signs and returns a credential issued by key's did:key.
func issue(key ed25519.PrivateKey, ctx, types []any, subject object, w Window, rnd io.Reader) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, errors.New("credential: the key is not an Ed25519 private key")
	}
	if w.ValidFrom.IsZero() || !w.ValidUntil.Truncate(time.Second).After(w.ValidFrom.Truncate(time.Second)) {
		return nil, errors.New("credential: the validity window is empty")
	}
	id, err := newUUID(rnd)
	if err != nil {
		return nil, err
	}
	doc := object{
		"@context":          ctx,
		"type":              types,
		"id":                id,
		"issuer":            identity.DIDFromPublicKey(key.Public().(ed25519.PublicKey)),
		"validFrom":         FormatTime(w.ValidFrom),
		"validUntil":        FormatTime(w.ValidUntil),
		"credentialSubject": subject,
	}
	unsigned, err := canonical(doc)
	if err != nil {
		return nil, fmt.Errorf("credential: %w", err)
	}
	signed, _, err := Sign(unsigned, key, Options{Created: w.ValidFrom})
	return signed, err
}

// newUUID returns "urn:uuid:" and a random (version 4) UUID read from rnd
// (crypto/rand when nil).
func newUUID(rnd io.Reader) (string, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	var b [16]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return "", fmt.Errorf("credential: id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return "urn:uuid:" + strings.Join([]string{h[:8], h[8:12], h[12:16], h[16:20], h[20:]}, "-"), nil
}
