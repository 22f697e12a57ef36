package credential

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// checkReputation holds a ReputationCredential, already verified as a
// credential, to the shape IssueReputation writes: issued by the did:key
// that signs, a subject with an id and lists of scores, each with exactly
// a name, a score and a confidence in [0, 1], a sample size of at least 1
// and the time of its last signal.
func checkReputation(doc object, r *Result) error {
	const check = "reputation"
	if !r.IssuerIsSigner {
		return fail(check, ErrShape, "the issuer must be the did:key that signs (%s), not %s", r.Signer, quote(r.Issuer))
	}
	subj, ok := doc["credentialSubject"].(object)
	if !ok {
		return fail(check, ErrShape, "credentialSubject is not one object")
	}
	if id, _ := subj["id"].(string); id == "" {
		return fail(check, ErrShape, "credentialSubject.id is %s, not a DID", kindOf(subj["id"]))
	}
	counts := map[string]int{}
	for _, list := range []string{"dimensions", "domains"} {
		v, ok := subj[list].([]any)
		if !ok {
			return fail(check, ErrShape, "credentialSubject.%s is %s, not an array", list, kindOf(subj[list]))
		}
		for i, e := range v {
			if err := checkScore(e); err != nil {
				return fail(check, ErrShape, "credentialSubject.%s[%d]: %v", list, i, err)
			}
		}
		counts[list] = len(v)
	}
	r.pass(check, "%d dimension and %d domain scores, each in [0, 1]", counts["dimensions"], counts["domains"])
	return nil
}

func checkScore(v any) error {
	s, ok := v.(object)
	if !ok {
		return fmt.Errorf("%s, not an object", kindOf(v))
	}
	names := sortedKeys(s)
	if strings.Join(names, ",") != "confidence,lastSignal,name,sampleSize,score" {
		return fmt.Errorf("members %s, want confidence, lastSignal, name, sampleSize and score", strings.Join(quoteAll(names), ", "))
	}
	if name, _ := s["name"].(string); name == "" {
		return fmt.Errorf("name is not a non-empty string")
	}
	for _, k := range []string{"score", "confidence"} {
		n, ok := s[k].(json.Number)
		f, err := strconv.ParseFloat(string(n), 64)
		if !ok || err != nil || f < 0 || f > 1 {
			return fmt.Errorf("%s is not a number in [0, 1]", k)
		}
	}
	n, ok := s["sampleSize"].(json.Number)
	if i, err := strconv.ParseInt(string(n), 10, 64); !ok || err != nil || i < 1 {
		return fmt.Errorf("sampleSize is not a whole number of at least 1")
	}
	ls, _ := s["lastSignal"].(string)
	if _, err := parseDateTime(ls); err != nil {
		return fmt.Errorf("lastSignal: %v", err)
	}
	return nil
}
