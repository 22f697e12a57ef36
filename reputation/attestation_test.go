package reputation

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/identity"
)

// The AVP fixture keys (public test seeds of the AVP SDK's samples).
const (
	avpPrincipalSeed = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	avpPrincipalDID  = "did:key:z6MkiYbwC5honA2sxE7XLAyJMDFibLvVg8FgodBX4A4CaUgr"
	avpAgentDID      = "did:key:z6Mkha2Epo5LtXSbfqe4pr6isB3r8Hx86QfMwfiAfUbf8db5"
)

// avpVectors were signed by a separate implementation of the AVP SDK's
// attest (Python json.dumps with sort_keys and compact separators, Ed25519
// from the principal seed): the signing input and signature must match
// byte for byte.
var avpVectors = []struct {
	a     Attestation
	input string
}{
	{Attestation{FromDID: avpPrincipalDID, ToDID: avpAgentDID, Outcome: "positive", Weight: 0.8, Context: "task_completion",
		Signature: "b2c02384b1007cd5512994994e730e1e511d05fd6a7d57f4e8440e03cee317c01c2bd4e45309fbcde6ef6231ac83fc627be067647bbb600b39e49d4c30d2b30d"},
		`{"context":"task_completion","evidence_hash":"","outcome":"positive","to":"did:key:z6Mkha2Epo5LtXSbfqe4pr6isB3r8Hx86QfMwfiAfUbf8db5","weight":0.8}`},
	{Attestation{FromDID: avpPrincipalDID, ToDID: avpAgentDID, Outcome: "negative", Weight: 1, Context: "réponse tardive", EvidenceHash: strings.Repeat("ab", 32),
		Signature: "c9c6bbdbf419230584e87766ff535f0fed4544dda00fe47afc9dd8e9558a6e7b858bec23cf6d56205f2e9ddf9ab15d3134868719e218b3cb8f4d290f6c123805"},
		`{"context":"r\u00e9ponse tardive","evidence_hash":"abababababababababababababababababababababababababababababababab","outcome":"negative","to":"did:key:z6Mkha2Epo5LtXSbfqe4pr6isB3r8Hx86QfMwfiAfUbf8db5","weight":1.0}`},
	{Attestation{FromDID: avpPrincipalDID, ToDID: avpAgentDID, Outcome: "neutral", Weight: 1e-05,
		Signature: "4d8c8e77e2ca2757dc1930fc9ccd081d7347aa87df19a1df4b2dbdc0b29a15824b33b326d03818b33c3a8aaf46986882c55415a4665079cdfe34552032318409"},
		`{"context":"","evidence_hash":"","outcome":"neutral","to":"did:key:z6Mkha2Epo5LtXSbfqe4pr6isB3r8Hx86QfMwfiAfUbf8db5","weight":1e-05}`},
}

func avpKey(t testing.TB) *identity.Keypair {
	t.Helper()
	seed, _ := hex.DecodeString(avpPrincipalSeed)
	k, err := identity.FromSeed(seed, "")
	if err != nil {
		t.Fatal(err)
	}
	if k.DID() != avpPrincipalDID {
		t.Fatalf("the fixture seed gives %s", k.DID())
	}
	return k
}

func TestAttestationAVPVectors(t *testing.T) {
	k := avpKey(t)
	for i, v := range avpVectors {
		if got := string(v.a.SigningInput()); got != v.input {
			t.Errorf("%d: signing input\n%s\nwant\n%s", i, got, v.input)
		}
		if err := v.a.Verify(); err != nil {
			t.Errorf("%d: %v", i, err)
		}
		signed := v.a
		if err := SignAttestation(&signed, k); err != nil || signed.Signature != v.a.Signature {
			t.Errorf("%d: signed %s, %v", i, signed.Signature, err)
		}
	}
}

func TestPythonFormats(t *testing.T) {
	tenth := 0.1
	for x, want := range map[float64]string{
		1: "1.0", 0: "0.0", 0.5: "0.5", 0.1: "0.1", 1e-05: "1e-05", 0.0001: "0.0001",
		0.00012345: "0.00012345", 1.5e-07: "1.5e-07", tenth + 0.2: "0.30000000000000004",
	} {
		if got := pyFloat(x); got != want {
			t.Errorf("pyFloat(%v) = %s, want %s", x, got, want)
		}
	}
	var b bytes.Buffer
	pyString(&b, "é😀\x7f\x01\"/\\\u2028\n\t")
	if want := `"\u00e9\ud83d\ude00\u007f\u0001\"/\\\u2028\n\t"`; b.String() != want {
		t.Errorf("pyString: %s, want %s", b.String(), want)
	}
}

// Changing any signed field, or the signer, breaks the signature.
func TestAttestationTamper(t *testing.T) {
	base := avpVectors[1].a
	other := testKey(t, 9).DID()
	for name, edit := range map[string]func(*Attestation){
		"to_did":        func(a *Attestation) { a.ToDID = other },
		"outcome":       func(a *Attestation) { a.Outcome = "neutral" },
		"weight":        func(a *Attestation) { a.Weight = 0.99 },
		"context":       func(a *Attestation) { a.Context = "réponse" },
		"evidence_hash": func(a *Attestation) { a.EvidenceHash = strings.Repeat("cd", 32) },
		"from_did":      func(a *Attestation) { a.FromDID = other },
		"signature":     func(a *Attestation) { a.Signature = strings.Repeat("0", 127) + "1" },
	} {
		a := base
		edit(&a)
		if err := a.Verify(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Attestations from outside are read strictly, and the error names what
// failed.
func TestParseAttestationsStrict(t *testing.T) {
	good, err := json.Marshal(avpVectors[0].a)
	if err != nil {
		t.Fatal(err)
	}
	if atts, err := ParseAttestations(good); err != nil || len(atts) != 1 {
		t.Fatalf("%v", err)
	}
	list := fmt.Sprintf("[%s,%s]", good, mustJSON(t, avpVectors[1].a))
	if atts, err := ParseAttestations([]byte(list)); err != nil || len(atts) != 2 {
		t.Fatalf("list: %v", err)
	}
	g := string(good)
	for name, tc := range map[string]struct{ data, want string }{
		"case variant":   {strings.Replace(g, `"from_did"`, `"From_DID"`, 1), `unknown field "From_DID"`},
		"unknown":        {strings.Replace(g, `{`, `{"is_private":true,`, 1), `unknown field "is_private"`},
		"duplicate":      {strings.Replace(g, `{`, `{"outcome":"negative",`, 1), `"outcome" appears twice`},
		"null":           {strings.Replace(g, `"outcome":"positive"`, `"outcome":null`, 1), `"outcome" is null`},
		"missing":        {strings.Replace(g, `"outcome":"positive",`, ``, 1), `"outcome" is required`},
		"trailing":       {g + `{}`, `more than one JSON value`},
		"empty list":     {`[]`, `empty list`},
		"empty":          {` `, `empty`},
		"not object":     {`[1]`, `attestation 1: `},
		"bad outcome":    {strings.Replace(g, `"positive"`, `"great"`, 1), `outcome "great"`},
		"weight":         {strings.Replace(g, `"weight":0.8`, `"weight":1.5`, 1), `weight 1.5 is outside`},
		"upper hex":      {strings.Replace(g, `"b2c0`, `"B2C0`, 1), `128 lowercase hex`},
		"signature":      {strings.Replace(g, `"b2c0`, `"b2c1`, 1), `signature does not verify`},
		"negative":       {string(mustJSON(t, Attestation{FromDID: avpPrincipalDID, ToDID: avpAgentDID, Outcome: "negative", Weight: 1, Signature: strings.Repeat("a", 128)})), `needs a context and an evidence_hash`},
		"self":           {strings.Replace(g, avpAgentDID, avpPrincipalDID, 1), `does not attest itself`},
		"from not key":   {strings.Replace(g, `"from_did":"did:key:`, `"from_did":"did:web:`, 1), `from_did "did:web:`},
		"second in list": {fmt.Sprintf("[%s,%s]", g, strings.Replace(g, `"b2c0`, `"b2c1`, 1)), `attestation 2: `},
		"too large":      {`[` + strings.Repeat(" ", MaxAttestationFile) + `]`, `larger than`},
		"not UTF-8":      {"\xff", `not valid UTF-8`},
	} {
		_, err := ParseAttestations([]byte(tc.data))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (want %q)", name, err, tc.want)
		}
	}
	many := "[" + strings.TrimSuffix(strings.Repeat(g+",", MaxAttestations+1), ",") + "]"
	if _, err := ParseAttestations([]byte(many)); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("too many: %v", err)
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Each attestation becomes one peer-attestation signal of the attested
// agent, recorded once however often it is imported.
func TestRecordAttestations(t *testing.T) {
	w := testWorkspace(t)
	bot := testKey(t, 5)
	var atts []Attestation
	for i, c := range []struct {
		seed    byte
		outcome string
		weight  float64
		want    float64
	}{{1, "positive", 0.8, 0.9}, {2, "neutral", 1, 0.5}, {3, "negative", 0.5, 0.25}, {4, "positive", 0, 0.5}} {
		a := Attestation{ToDID: bot.DID(), Outcome: c.outcome, Weight: c.weight, Context: "task_completion", EvidenceHash: strings.Repeat("0", 64)}
		if err := SignAttestation(&a, testKey(t, c.seed)); err != nil {
			t.Fatal(err)
		}
		if s := a.Signal(t0); s.Score != c.want || s.Source != testKey(t, c.seed).DID() || s.Dimension != PeerAttestation || !strings.HasPrefix(s.Evidence, "avp-attestation:") {
			t.Errorf("%d: %+v", i, s)
		}
		atts = append(atts, a)
	}
	res, err := w.RecordAttestations(atts, t0)
	if err != nil || len(res) != 4 {
		t.Fatal(err)
	}
	res, err = w.RecordAttestations(atts[:2], t0.Add(time.Hour))
	if err != nil || !res[0].Duplicate || !res[1].Duplicate {
		t.Fatalf("a second import: %+v %v", res, err)
	}
	p, err := w.Profile(bot.ID())
	if err != nil || len(p.Signals) != 4 {
		t.Fatalf("%v", err)
	}
	v, err := w.Trust(bot.ID(), t0)
	if err != nil || v.Known || len(v.PeerAttesters) != 1 || v.PeerAttesters[0] != testKey(t, 1).DID() {
		t.Fatalf("trust: %+v %v", v, err)
	}
	// A bad attestation anywhere in the batch records nothing.
	bad := atts[0]
	bad.Weight = 0.7
	fresh := atts[1]
	fresh.ToDID = testKey(t, 6).DID()
	if err := SignAttestation(&fresh, testKey(t, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.RecordAttestations([]Attestation{fresh, bad}, t0); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "attestation 2") {
		t.Fatalf("%v", err)
	}
	if _, err := w.Profile(testKey(t, 6).ID()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the good attestation of a refused batch was recorded: %v", err)
	}
}

// The starter floor holds a new agent at 0.25 until enough trusted
// attesters vouched for it, and never raises a known lower score.
func TestStarterFloor(t *testing.T) {
	a, b, c, d := testKey(t, 1).DID(), testKey(t, 2).DID(), testKey(t, 3).DID(), testKey(t, 4).DID()
	gate := TrustGate{MinReliability: 0.5, MinConfidence: 0.3, StarterFloor: &StarterFloor{TrustedAttesters: []string{a, b, c}}}
	agent := testKey(t, 5).DID()
	for name, tc := range map[string]struct {
		v       TrustView
		floor   bool
		allowed bool
		score   float64
	}{
		"new":                        {TrustView{Agent: agent}, true, false, 0.25},
		"two trusted, one untrusted": {TrustView{Agent: agent, PeerAttesters: []string{a, b, d}}, true, false, 0.25},
		"three trusted, unknown":     {TrustView{Agent: agent, PeerAttesters: []string{a, b, c}}, false, true, 0},
		"three trusted, unreliable":  {TrustView{Agent: agent, Known: true, Reliability: 0.3, Confidence: 0.5, PeerAttesters: []string{a, b, c}}, false, false, 0.3},
		"floored, known lower":       {TrustView{Agent: agent, Known: true, Reliability: 0.1, Confidence: 0.5}, true, false, 0.1},
		"floored, good but few":      {TrustView{Agent: agent, Known: true, Reliability: 0.9, Confidence: 0.1}, true, false, 0.25},
		"self among attesters":       {TrustView{Agent: a, PeerAttesters: []string{a, b, c}}, true, false, 0.25},
	} {
		r := gate.Report(tc.v)
		if r.FloorApplied != tc.floor || r.Allowed != tc.allowed || r.Score != tc.score {
			t.Errorf("%s: %+v", name, r)
		}
		data, err := json.Marshal(r)
		if err != nil || !bytes.Contains(data, []byte(fmt.Sprintf(`"floor_applied":%t`, tc.floor))) {
			t.Errorf("%s: %s %v", name, data, err)
		}
	}
	low := TrustGate{MinReliability: 0.2, StarterFloor: &StarterFloor{TrustedAttesters: []string{a}, MinAttesters: 1}}
	if r := low.Report(TrustView{Agent: agent}); !r.FloorApplied || !r.Allowed {
		t.Errorf("a floor above the threshold: %+v", r)
	}
	if r := low.Report(TrustView{Agent: agent, PeerAttesters: []string{a}}); r.FloorApplied {
		t.Errorf("one of one: %+v", r)
	}
}

// FuzzParseAttestations: reading never panics, and what it accepts
// verifies and reads back the same after writing.
func FuzzParseAttestations(f *testing.F) {
	for _, v := range avpVectors {
		f.Add(mustJSON(f, v.a))
	}
	f.Add([]byte(fmt.Sprintf("[%s,%s]", mustJSON(f, avpVectors[0].a), mustJSON(f, avpVectors[2].a))))
	f.Add([]byte(`{"from_did":"did:key:z6Mk","to_did":"did:web:x","outcome":"positive","weight":1e-400,"signature":""}`))
	f.Add([]byte(`[{"FROM_DID":1},null,"x"]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		atts, err := ParseAttestations(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("an error that is not ErrInvalid: %v", err)
			}
			return
		}
		for i := range atts {
			if err := atts[i].Verify(); err != nil {
				t.Fatalf("accepted an attestation that does not verify: %v", err)
			}
		}
		back, err := ParseAttestations(mustJSON(t, atts))
		if err != nil || len(back) != len(atts) {
			t.Fatalf("written back: %v", err)
		}
		for i := range atts {
			if back[i] != atts[i] {
				t.Fatalf("read back %+v, want %+v", back[i], atts[i])
			}
		}
	})
}
