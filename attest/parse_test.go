package attest

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/sig"
)

func TestParseRoundTrip(t *testing.T) {
	p := testParams()
	score, details := 0.5, ""
	p.Outcome = &VerificationOutcome{Method: "deterministic_check", Passed: true, Score: &score, Details: &details}
	p.Children = []string{idN("att_", 7), idN("att_", 3)}
	a := create(t, aliceKey, p)
	b := mustMarshal(t, a)
	for _, form := range [][]byte{b, indent(t, b)} {
		back, err := Parse(form)
		if err != nil {
			t.Fatal(err)
		}
		if err := back.Verify(); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, a) {
			t.Errorf("round trip changed the attestation:\n%+v\n%+v", back, a)
		}
	}
}

// Optional members are signed exactly when present: "details":"" and
// "output":null are values, distinct from absence, and an attestation
// another implementation signed with them verifies.
func TestOptionalMembersAsSigned(t *testing.T) {
	for _, extra := range []string{`"output":null`, `"output":{}`, `"output":""`, `"output":0`, `"outputHash":"blake2b-256:` + strings.Repeat("0", 64) + `"`,
		`"verificationOutcome":{"details":"","method":"m","passed":false}`,
		`"verificationOutcome":{"method":"m","passed":false,"score":0}`} {
		t.Run(extra, func(t *testing.T) {
			unsigned := `{"childAttestations":[],"contractId":"ct_000000000001","createdAt":"2026-01-01T01:00:00Z",` +
				`"delegationId":"del_x","id":"att_000000000001","principal":"` + aliceKey.ID() + `",` +
				`"result":{"costMicrocents":0,"durationMs":0,` + extra + `,"success":false},"type":"completion","version":"0.1"}`
			var v any
			if err := json.Unmarshal([]byte(unsigned), &v); err != nil {
				t.Fatal(err)
			}
			signature, err := sig.Sign(aliceKey.PrivateKey(), v)
			if err != nil {
				t.Fatal(err)
			}
			file := strings.TrimSuffix(unsigned, "}") + `,"signature":"` + signature + `"}`
			a, err := Parse([]byte(file))
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Verify(); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			// Dropping the member is tampering.
			out := string(mustMarshal(t, a))
			if !strings.Contains(out, extra) {
				t.Fatalf("%s lost %s", out, extra)
			}
			without := strings.NewReplacer(extra+",", "", ","+extra, "").Replace(out)
			if without == out {
				t.Fatal("could not drop the member")
			}
			dropped, err := Parse([]byte(without))
			if err != nil {
				t.Fatal(err)
			}
			if err := dropped.Verify(); !errors.Is(err, ErrInvalidSignature) {
				t.Errorf("without %s: %v, want ErrInvalidSignature", extra, err)
			}
		})
	}
}

func TestParseOutputSpellings(t *testing.T) {
	p := testParams()
	p.Output = json.RawMessage(`{"n":1000,"s":"é","x":0.1}`)
	a := create(t, aliceKey, p)
	file := strings.Replace(string(indent(t, mustMarshal(t, a))), `"n": 1000`, `"n": 1E3`, 1)
	file = strings.Replace(file, `"é"`, `"\u00e9"`, 1)
	back, err := Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(); err != nil {
		t.Fatal(err)
	}
	if string(back.Result.Output) != `{"n":1000,"s":"é","x":0.1}` {
		t.Errorf("output %s, want the canonical form", back.Result.Output)
	}
}

func TestParseRefuses(t *testing.T) {
	p := testParams()
	p.Outcome = &VerificationOutcome{Method: "deterministic_check", Passed: true}
	p.Children = []string{idN("att_", 9)}
	a := create(t, aliceKey, p)
	good := string(mustMarshal(t, a))
	replace := func(old, new string) string {
		s := strings.Replace(good, old, new, 1)
		if s == good {
			t.Fatalf("%q not in %s", old, good)
		}
		return s
	}
	hash, _ := OutputHash([]byte(testOutput))
	otherHash, _ := OutputHash([]byte(`{}`))
	tests := []struct{ name, data string }{
		{"empty", ""},
		{"array", "[]"},
		{"trailing data", good + " 1"},
		{"duplicate member", replace(`{"childAttestations":`, `{"id":"att_a1b2c3d4e5f6","childAttestations":`)},
		{"duplicate in result", replace(`"success":true`, `"success":true,"success":false`)},
		{"duplicate in output", replace(`"pages":3`, `"pages":3,"pages":4`)},
		{"duplicate in outcome", replace(`"passed":true`, `"passed":true,"passed":false`)},
		{"re-cased member", replace(`"principal":`, `"Principal":`)},
		{"re-cased result member", replace(`"costMicrocents":`, `"CostMicrocents":`)},
		{"unknown member", replace(`"type":`, `"note":"x","type":`)},
		{"unknown result member", replace(`"success":`, `"tokens":5,"success":`)},
		{"unknown outcome member", replace(`"passed":`, `"weight":1,"passed":`)},
		{"invalid UTF-8", replace(`Quantum`, "Quan\xfftum")},
		{"lone surrogate", replace(`Quantum`, `Quan\ud800tum`)},
		{"output 1e400", replace(`"pages":3`, `"pages":1e400`)},
		{"output big integer", replace(`"pages":3`, `"pages":9007199254740993`)},
		{"output 1e20", replace(`"pages":3`, `"pages":1e20`)},
		{"output too deep", replace(`"pages":3`, `"pages":`+strings.Repeat("[", MaxValueDepth)+strings.Repeat("]", MaxValueDepth))},
		{"version", replace(`"version":"0.1"`, `"version":"0.2"`)},
		{"id", replace(`"id":"att_a1b2c3d4e5f6"`, `"id":"att_a1b2c3d4e5f"`)},
		{"contractId", replace(`"contractId":"ct_000000000001"`, `"contractId":"ct_00000000001"`)},
		{"delegationId empty", replace(`"delegationId":"del_000000000001"`, `"delegationId":""`)},
		{"principal did:key", replace(aliceKey.ID(), aliceKey.DID())},
		{"createdAt", replace(`"createdAt":"2026-01-01T01:00:00.000Z"`, `"createdAt":"2026-01-01 01:00:00"`)},
		{"type", replace(`"type":"completion"`, `"type":"Completion"`)},
		{"cost negative", replace(`"costMicrocents":1000`, `"costMicrocents":-1`)},
		{"cost fraction", replace(`"costMicrocents":1000`, `"costMicrocents":1000.5`)},
		{"cost 2^53", replace(`"costMicrocents":1000`, `"costMicrocents":9007199254740992`)},
		{"duration negative", replace(`"durationMs":1500`, `"durationMs":-1500`)},
		{"success string", replace(`"success":true`, `"success":"true"`)},
		{"outputHash mismatch", replace(`"output":`, `"outputHash":"`+otherHash+`","output":`)},
		{"outputHash upper case", replace(`"output":`, `"outputHash":"`+strings.ToUpper(hash)+`","output":`)},
		{"outputHash other algorithm", replace(`"output":`, `"outputHash":"sha256:`+hash[len("blake2b-256:"):]+`","output":`)},
		{"outputHash short", replace(`"output":`, `"outputHash":"`+hash[:len(hash)-1]+`","output":`)},
		{"outputHash null", replace(`"output":`, `"outputHash":null,"output":`)},
		{"outcome method empty", replace(`"method":"deterministic_check"`, `"method":""`)},
		{"outcome score", replace(`"passed":true`, `"passed":true,"score":1.01`)},
		{"outcome null", replace(`"verificationOutcome":{"method":"deterministic_check","passed":true}`, `"verificationOutcome":null`)},
		{"success null", replace(`"success":true`, `"success":null`)},
		{"cost null", replace(`"costMicrocents":1000`, `"costMicrocents":null`)},
		{"delegationId null", replace(`"delegationId":"del_000000000001"`, `"delegationId":null`)},
		{"outcome passed null", replace(`"passed":true`, `"passed":null`)},
		{"outcome score null", replace(`"passed":true`, `"passed":true,"score":null`)},
		{"outcome details null", replace(`"passed":true`, `"passed":true,"details":null`)},
		{"result null", replace(`"result":{`, `"result":null,"x":{`)},
		{"children missing", replace(`"childAttestations":["att_000000000009"],`, ``)},
		{"children null", replace(`["att_000000000009"]`, `null`)},
		{"child id", replace(`"att_000000000009"`, `"ct_000000000009"`)},
		{"child twice", replace(`"att_000000000009"`, `"att_000000000009","att_000000000009"`)},
		{"child is itself", replace(`"att_000000000009"`, `"att_a1b2c3d4e5f6"`)},
		{"signature missing", replace(`,"signature":"`+a.Signature+`"`, ``)},
		{"signature short", replace(a.Signature, a.Signature[:85])},
		{"over the size limit", replace(`"Quantum`, `"`+strings.Repeat("q", MaxAttestationSize)+`Quantum`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse([]byte(tt.data)); !errors.Is(err, ErrMalformed) {
				t.Errorf("got %v, want ErrMalformed", err)
			}
		})
	}
}
