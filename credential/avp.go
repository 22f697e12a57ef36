package credential

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// AVP's DelegationReceipt: its context and type.
const (
	ContextAVPDelegation = "https://agentveil.dev/contexts/delegation/v1.jsonld"
	TypeAgentDelegation  = "AgentDelegation"
)

// The scope predicates AVP defines.
const (
	PredicateMaxSpend        = "max_spend"
	PredicateAllowedCategory = "allowed_category"
)

// avpTime is the one date form AVP writes and accepts.
var avpTime = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$`)

var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// checkDelegationReceipt holds an AgentDelegation credential, already
// verified as a credential, to AVP's DelegationReceipt rules.
func checkDelegationReceipt(doc object, r *Result) error {
	const check = "delegation receipt"
	for _, want := range []string{ContextV2, ContextAVPDelegation} {
		found := false
		for _, e := range contextList(doc["@context"]) {
			found = found || e == want
		}
		if !found {
			return fail(check, ErrShape, "@context lacks %s", want)
		}
	}
	if !strings.HasPrefix(r.ID, "urn:uuid:") {
		return fail(check, ErrShape, "id %s is not a urn:uuid", quote(r.ID))
	}
	if _, ok := doc["issuer"].(string); !ok || !r.IssuerIsSigner {
		return fail(check, ErrShape, "the issuer must be the did:key that signs (%s), not %s", r.Signer, quote(r.Issuer))
	}
	if r.Construction == W3C {
		if _, ok := doc["proof"].(object)["@context"]; !ok {
			return fail(check, ErrShape, "the proof has no @context; AVP requires the document's")
		}
	}
	for _, name := range []string{"validFrom", "validUntil"} {
		s, _ := doc[name].(string)
		if !avpTime.MatchString(s) {
			return fail(check, ErrShape, "%s %s is not YYYY-MM-DDTHH:MM:SSZ", name, presentOr(s, s != ""))
		}
	}
	if !r.ValidUntil.After(r.ValidFrom) {
		return fail(check, ErrShape, "validUntil %s is not after validFrom %s", FormatTime(r.ValidUntil), FormatTime(r.ValidFrom))
	}
	subj, ok := doc["credentialSubject"].(object)
	if !ok {
		return fail(check, ErrShape, "credentialSubject is not one object")
	}
	if id, _ := subj["id"].(string); !strings.HasPrefix(id, "did:key:") {
		return fail(check, ErrShape, "credentialSubject.id %s is not a did:key", describe(subj["id"]))
	}
	if v, ok := subj["delegator"]; ok {
		// This package's receipts name the issuer as delegator: no key
		// states that someone else delegated.
		if d, _ := v.(string); d != r.Issuer {
			return fail(check, ErrShape, "credentialSubject.delegator %s is not the issuer %s", describe(v), r.Issuer)
		}
	}
	if _, ok := subj["purpose"].(string); !ok {
		return fail(check, ErrShape, "credentialSubject.purpose is %s, not a string", kindOf(subj["purpose"]))
	}
	scope, ok := subj["scope"].([]any)
	if !ok {
		return fail(check, ErrShape, "credentialSubject.scope is %s, not an array", kindOf(subj["scope"]))
	}
	for i, e := range scope {
		if err := checkScopeEntry(e); err != nil {
			return fail(check, ErrShape, "credentialSubject.scope[%d]: %v", i, err)
		}
	}
	entries := "entries"
	if len(scope) == 1 {
		entries = "entry"
	}
	r.pass(check, "AVP DelegationReceipt: both contexts and types, the issuer signs, %d scope %s", len(scope), entries)
	return nil
}

type scopeError string

func (e scopeError) Error() string { return string(e) }

// checkScopeEntry checks one scope entry: max_spend or allowed_category,
// with exactly their members.
func checkScopeEntry(v any) error {
	e, ok := v.(object)
	if !ok {
		return scopeError(kindOf(v) + ", not an object")
	}
	pred, _ := e["predicate"].(string)
	names := sortedKeys(e)
	keys, shown := strings.Join(names, ","), strings.Join(quoteAll(names), ", ")
	switch pred {
	case PredicateMaxSpend:
		if keys != "amount,currency,predicate" {
			return scopeError("max_spend has exactly amount, currency and predicate, not " + shown)
		}
		if c, _ := e["currency"].(string); !currencyCode.MatchString(c) {
			return scopeError("currency " + describe(e["currency"]) + " is not three capital letters")
		}
		n, ok := e["amount"].(json.Number)
		if !ok {
			return scopeError("amount is " + kindOf(e["amount"]) + ", not a number")
		}
		if f, err := strconv.ParseFloat(string(n), 64); err != nil || f <= 0 {
			return scopeError("amount " + string(n) + " is not above 0")
		}
	case PredicateAllowedCategory:
		if keys != "predicate,value" {
			return scopeError("allowed_category has exactly predicate and value, not " + shown)
		}
		if s, _ := e["value"].(string); s == "" {
			return scopeError("allowed_category's value is not a non-empty string")
		}
	default:
		return scopeError("predicate " + describe(e["predicate"]) + " is neither max_spend nor allowed_category")
	}
	return nil
}
