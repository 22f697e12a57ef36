package initiator

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/ldp"
	"github.com/delegateos/delegateos/reputation"
)

// ErrNoCapability is returned by NarrowToken when neither the caller nor
// the delegate's card says which capability the skill needs.
var ErrNoCapability = errors.New("the card does not say which capability the skill needs")

// ErrSelfRating is returned by RecordOutcome when the observer is the
// delegate itself.
var ErrSelfRating = errors.New("an agent does not rate itself (self-dealing)")

// NarrowToken attenuates parent to k itself (k signs the TASK_SUBMIT, so
// it stays the token's delegatee, as the delegate's gate requires),
// narrowed to caps (none given: the capability the card names for the
// skill, MetaCapabilityPrefix), to budget microcents (0 keeps the
// token's), to expire after ttl (or with the token, if sooner), with no
// further delegation. It returns the token and its new delegation ID.
func NarrowToken(parent *dct.Token, k *identity.Keypair, card *ldp.IdentityCard, skill string, caps []dct.Capability, budget int64, ttl time.Duration) (*dct.Token, string, error) {
	if len(caps) == 0 {
		s, ok := card.Metadata[ldp.MetaCapabilityPrefix+skill]
		if !ok {
			return nil, "", fmt.Errorf("%w: %s names none for %q (metadata %s%s)", ErrNoCapability, card.DelegateID, skill, ldp.MetaCapabilityPrefix, skill)
		}
		c, err := dct.ParseCapability(s)
		if err != nil {
			return nil, "", fmt.Errorf("%s's capability for %q: %w", card.DelegateID, skill, err)
		}
		caps = []dct.Capability{c}
	}
	now := time.Now()
	exp := now.Add(ttl)
	if pe := tokenExpiry(parent); !pe.IsZero() && pe.Before(exp) {
		exp = pe
	}
	zero := int64(0)
	p := dct.AttenuateParams{Attenuator: k, Delegatee: k.ID(), DelegationID: newDelegationID(),
		Capabilities: &caps, ExpiresAt: &exp, MaxChainDepth: &zero, Now: now}
	if budget > 0 {
		p.MaxBudgetMicrocents = &budget
	}
	tok, err := dct.Attenuate(parent, p)
	if err != nil {
		return nil, "", fmt.Errorf("narrowing the token for the task: %w", err)
	}
	return tok, p.DelegationID, nil
}

// tokenExpiry is when a token expires: its earliest expiry.
func tokenExpiry(tok *dct.Token) time.Time {
	st := tok.Unverified()
	exp, _ := timestamp.Parse(st.Authority.ExpiresAt)
	for _, a := range st.Attenuations {
		if a.ExpiresAt != nil {
			if t, err := timestamp.Parse(*a.ExpiresAt); err == nil && t.Before(exp) {
				exp = t
			}
		}
	}
	return exp
}

// TextInput is a frame's text-mode form (§4.3 fallback): text, else the
// frame's instruction, else the frame itself as a string.
func TextInput(frame json.RawMessage, text string) json.RawMessage {
	if text == "" {
		var f struct {
			Instruction string `json:"instruction"`
		}
		if json.Unmarshal(frame, &f) == nil && f.Instruction != "" {
			text = f.Instruction
		} else if json.Unmarshal(frame, &text) != nil {
			text = string(frame)
		}
	}
	b, _ := json.Marshal(text)
	return b
}

// RecordOutcome records what the task showed of the delegate, as RDP
// domain competence in the skill: a result the caller's score, a task the
// delegate itself failed 0.0; nothing for a refusal (policy, security,
// session: not the delegate's competence) or a result without a score. A
// failure is a refusal only when its code and category agree with the
// table of ldp.CodeCategory (ldp.DelegatesFailure): the delegate chooses
// the category it sends. A result's verified: true is the delegate's own claim
// (any delegate can write it), so it is never recorded as a score: that
// would let a delegate set its own reputation. x, when not nil, is what
// the initiator knows of the exchange: a refusal it contradicts (a
// SKILL_UNKNOWN for a skill the card lists, …: ldp.Exchange.Contradicts)
// is counted as the delegate's failure.
func RecordOutcome(w *reputation.Workspace, source, did, delegateID, skill, taskID string, reply *ldp.Envelope, score *float64, x *ldp.Exchange) (*reputation.Signal, string, error) {
	if reputation.SameAgent(source, did) {
		return nil, "", fmt.Errorf("%w: the observer %s is the delegate", ErrSelfRating, source)
	}
	var s float64
	var msg string
	switch b := reply.Body.(type) {
	case *ldp.TaskResult:
		switch {
		case score != nil:
			s, msg = *score, "result evaluated by the initiator"
		case b.Provenance.Verified:
			return nil, "the delegate says its result is verified (" + b.Provenance.VerificationStatus + "), which is its own claim: give --score with your evaluation to record it", nil
		default:
			return nil, "an unverified result: give --score with your evaluation to record it", nil
		}
	case *ldp.TaskFailed:
		c := b.Error.Category
		failed, why := ldp.DelegatesFailureIn(b.Error, x)
		if !failed {
			return nil, fmt.Sprintf("a %s refusal (%s) says nothing of the delegate's competence", c, b.Error.Code), nil
		}
		s, msg = 0, "task failed: "+b.Error.Code
		switch {
		case why != "":
			msg += fmt.Sprintf(" (called a %s refusal, which this exchange contradicts: %s; counted as the delegate's failure)", c, why)
		case c != ldp.CategoryRuntime && c != ldp.CategoryQuality:
			// The delegate chose the category: one its code does not
			// have, or a code no table gives one, is not taken.
			msg += fmt.Sprintf(" (called a %s refusal, which that code is not: counted as the delegate's failure)", c)
		}
	}
	sig := reputation.Signal{Source: source, Dimension: reputation.DomainCompetence, Domain: skill, Score: s,
		Timestamp: time.Now().UTC(), Evidence: "ldp:" + delegateID + ":" + taskID, Message: msg}
	if _, err := w.Record(did, delegateID, sig); err != nil {
		return nil, "", fmt.Errorf("recording the outcome: %w", err)
	}
	return &sig, "", nil
}

// Grants reports whether tok's capabilities (its last block's, else its
// authority's) grant the capability c as a card states it
// (NS:ACTION:RESOURCE pattern): one of them holds all of c.
func Grants(tok *dct.Token) func(c string) bool {
	return func(c string) bool {
		want, err := dct.ParseCapability(c)
		if err != nil {
			return false
		}
		st := tok.Unverified()
		caps := st.Authority.Capabilities
		for _, a := range st.Attenuations {
			if a.AllowedCapabilities != nil {
				caps = *a.AllowedCapabilities
			}
		}
		for _, have := range caps {
			if want.SubsetOf(have) {
				return true
			}
		}
		return false
	}
}

// newDelegationID is a random del_ ID.
func newDelegationID() string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "del_" + hex.EncodeToString(b[:])
}
