package credential

import (
	"strings"
	"time"
)

// contextV1 is the VC 1.1 base context, which this package does not verify.
const contextV1 = "https://www.w3.org/2018/credentials/v1"

// TypeCredential is the type every credential has.
const TypeCredential = "VerifiableCredential"

// checkCredential checks the rules of the VC 2.0 data model this package
// relies on, and fills r from the document.
func checkCredential(doc object, r *Result) error {
	ctx, ok := doc["@context"]
	if !ok {
		return fail("credential", ErrShape, "no @context: a VC 2.0 credential's starts with %s", ContextV2)
	}
	list := contextList(ctx)
	if len(list) == 0 {
		return fail("credential", ErrShape, "@context is empty: a VC 2.0 credential's starts with %s", ContextV2)
	}
	for i, e := range list {
		switch e.(type) {
		case string, object:
		default:
			return fail("credential", ErrShape, "@context entry %d is %s, not a URL or an object", i, kindOf(e))
		}
	}
	if first, _ := list[0].(string); first != ContextV2 {
		if first == contextV1 {
			return fail("credential", ErrUnsupported, "a VC 1.1 credential (@context %s); only VC 2.0 is verified", contextV1)
		}
		return fail("credential", ErrShape, "@context starts with %s, not the VC 2.0 context %s", describe(list[0]), ContextV2)
	}
	types, err := typeList(doc)
	if err != nil {
		return err
	}
	if !contains(types, TypeCredential) {
		return fail("credential", ErrShape, "type %s does not include %s", strings.Join(quoteAll(types), ", "), TypeCredential)
	}
	r.Types = types
	if v, ok := doc["id"]; ok {
		id, ok := v.(string)
		if !ok {
			return fail("credential", ErrShape, "id is %s, not a URL", kindOf(v))
		}
		r.ID = id
	}
	issuer, err := issuerOf(doc)
	if err != nil {
		return err
	}
	r.Issuer, r.IssuerIsSigner = issuer, issuer == r.Signer
	if !r.IssuerIsSigner && len(issuer) >= len("did:key:") && strings.EqualFold(issuer[:len("did:key:")], "did:key:") {
		// A did:key's only verification method is its own key (and
		// DID:KEY:… is no other DID).
		return fail("credential", ErrShape, "issuer %s is a did:key, and the proof is by another key, %s", quote(issuer), r.Signer)
	}
	if err := checkSubject(doc, r); err != nil {
		return err
	}
	for _, name := range []string{"validFrom", "validUntil"} {
		s, ok, err := stringMember(doc, "credential", name)
		if err != nil {
			return fail("credential", ErrShape, "%s is not a string", name)
		}
		if !ok {
			continue
		}
		t, err := parseDateTime(s)
		if err != nil {
			return fail("credential", ErrShape, "%s: %v", name, err)
		}
		if name == "validFrom" {
			r.ValidFrom = t
		} else {
			r.ValidUntil = t
		}
	}
	if !r.ValidFrom.IsZero() && !r.ValidUntil.IsZero() && r.ValidUntil.Before(r.ValidFrom) {
		return fail("credential", ErrShape, "validUntil %s is before validFrom %s", FormatTime(r.ValidUntil), FormatTime(r.ValidFrom))
	}
	who := "the issuer is the signer"
	if !r.IssuerIsSigner {
		who = "issuer " + quote(issuer) + " is not the signer (the cryptosuite does not bind them)"
	}
	r.pass("credential", "VC 2.0, type %s; %s", strings.Join(types, ", "), who)
	return nil
}

// typeList reads type: a string or an array of strings.
func typeList(doc object) ([]string, error) {
	v, ok := doc["type"]
	if !ok {
		return nil, fail("credential", ErrShape, "no type")
	}
	switch t := v.(type) {
	case string:
		return []string{t}, nil
	case []any:
		types := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, fail("credential", ErrShape, "type holds %s, not only strings", kindOf(e))
			}
			types = append(types, s)
		}
		return types, nil
	}
	return nil, fail("credential", ErrShape, "type is %s, not a string or an array of strings", kindOf(v))
}

// issuerOf reads issuer: a URL, or an object with an id.
func issuerOf(doc object) (string, error) {
	v, ok := doc["issuer"]
	if !ok {
		return "", fail("credential", ErrShape, "no issuer")
	}
	switch i := v.(type) {
	case string:
		if i == "" {
			return "", fail("credential", ErrShape, "issuer is empty")
		}
		return i, nil
	case object:
		id, ok := i["id"].(string)
		if !ok || id == "" {
			return "", fail("credential", ErrShape, "issuer is an object without a string id")
		}
		return id, nil
	}
	return "", fail("credential", ErrShape, "issuer is %s, not a URL or an object", kindOf(v))
}

// checkSubject reads credentialSubject: an object or a non-empty array of
// objects.
func checkSubject(doc object, r *Result) error {
	v, ok := doc["credentialSubject"]
	if !ok {
		return fail("credential", ErrShape, "no credentialSubject")
	}
	switch s := v.(type) {
	case object:
	case []any:
		if len(s) == 0 {
			return fail("credential", ErrShape, "credentialSubject is an empty array")
		}
		for _, e := range s {
			if _, ok := e.(object); !ok {
				return fail("credential", ErrShape, "credentialSubject holds %s, not only objects", kindOf(e))
			}
		}
	default:
		return fail("credential", ErrShape, "credentialSubject is %s, not an object", kindOf(v))
	}
	c, err := canonical(v)
	if err != nil {
		return fail("credential", ErrMalformed, "%v", err)
	}
	r.Subject = c
	return nil
}

// checkValidity judges the validity window at now, accepting a credential
// skew early.
func checkValidity(r *Result, now time.Time, skew time.Duration) error {
	if !r.ValidFrom.IsZero() && now.Add(skew).Before(r.ValidFrom) {
		return fail("validity", ErrNotYetValid, "valid from %s (now %s)", FormatTime(r.ValidFrom), FormatTime(now))
	}
	if !r.ValidUntil.IsZero() && now.After(r.ValidUntil) {
		return fail("validity", ErrExpired, "valid until %s (now %s)", FormatTime(r.ValidUntil), FormatTime(now))
	}
	from, until := "no validFrom", "no validUntil"
	if !r.ValidFrom.IsZero() {
		from = "valid from " + FormatTime(r.ValidFrom)
	}
	if !r.ValidUntil.IsZero() {
		until = "until " + FormatTime(r.ValidUntil)
	}
	r.pass("validity", "%s, %s; judged at %s", from, until, FormatTime(now))
	return nil
}

func describe(v any) string {
	if s, ok := v.(string); ok {
		return quote(s)
	}
	return kindOf(v)
}

func quoteAll(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = quote(s)
	}
	return out
}
