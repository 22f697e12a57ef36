package ldp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"os"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/cputime"
)

func TestNumberIssues(t *testing.T) {
	for _, c := range []struct {
		in          string
		issue, loss bool
	}{
		{`{"a":1,"b":[0.5,-2,1e+21,1e-7]}`, false, false},
		{`1.0`, true, false},
		{`1E2`, true, false},
		{`-0`, true, false},
		{`100e-2`, true, false},
		{`9007199254740992`, false, false},
		{`9007199254740993`, true, true},
		{`0.1000000000000000055511151231257827`, true, true},
		{`1e400`, true, true},
		{`1e-400`, true, true},
		{`"1.0"`, false, false},
	} {
		is, err := firstNumberIssue([]byte(c.in), false)
		if err != nil || (is != nil) != c.issue || (is != nil && is.lossy != c.loss) {
			t.Errorf("%s: issue %+v, err %v; want issue %v lossy %v", c.in, is, err, c.issue, c.loss)
		}
		err = checkJCSNumbers([]byte(c.in))
		if (err != nil) != c.issue {
			t.Errorf("%s: checkJCSNumbers %v", c.in, err)
		}
		_, err = ValueHash(json.RawMessage(c.in))
		if (err != nil) != c.loss {
			t.Errorf("%s: ValueHash %v", c.in, err)
		}
	}
}

// TestSignEd25519CanonicalNumbers: the signer writes numbers in their JCS
// form and refuses one whose JCS form is another number.
func TestSignEd25519CanonicalNumbers(t *testing.T) {
	e := submitEnvelope()
	e.Body.(*TaskSubmit).Input = json.RawMessage(`{"n":1.0,"m":[1E2]}`)
	if err := SignEd25519(e, testKey(1)); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(e)
	p, err := ParseEnvelope(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(p.Body.(*TaskSubmit).Input); got != `{"m":[100],"n":1}` {
		t.Fatalf("input sent %s", got)
	}
	if err := verifyEd25519(p, ""); err != nil {
		t.Fatal(err)
	}
	e.Body.(*TaskSubmit).Input = json.RawMessage(`{"n":12345678901234567890}`)
	if err := SignEd25519(e, testKey(1)); err == nil || !strings.Contains(err.Error(), "12345678901234567890") {
		t.Fatalf("signed a lossy number: %v", err)
	}
}

// FuzzJCSNumbers holds sameDecimal to exact rational arithmetic.
func FuzzJCSNumbers(f *testing.F) {
	for _, s := range []string{"1", "1.0", "-0", "1e2", "9007199254740993", "0.1", "5e-324", "1.7976931348623157e308", "123.456e-7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		var n json.Number
		if json.Unmarshal([]byte(lit), &n) != nil || len(lit) > 40 || strings.ContainsAny(lit, " \t\r\n\"") {
			return
		}
		is, err := firstNumberIssue([]byte(lit), false)
		if err != nil {
			t.Fatal(err)
		}
		c, err := jcsNumber(lit)
		if err != nil {
			if is == nil || !is.lossy {
				t.Fatalf("%s: no JCS form, yet %+v", lit, is)
			}
			return
		}
		// big.Rat refuses exponents beyond about a million: nothing to
		// compare with then.
		a, ok1 := new(big.Rat).SetString(lit)
		b, ok2 := new(big.Rat).SetString(c)
		if !ok1 || !ok2 {
			return
		}
		if same := a.Cmp(b) == 0; same != sameDecimal(lit, c) {
			t.Fatalf("%s vs %s: exact %v, sameDecimal %v", lit, c, same, !same)
		}
		if (is == nil) != (c == lit) {
			t.Fatalf("%s (JCS %s): issue %+v", lit, c, is)
		}
	})
}

// firstNumberIssueByTokens is firstNumberIssue as json.Decoder's tokens
// read it: the reference the byte scan is held to.
func firstNumberIssueByTokens(data []byte, lossyOnly bool) (*numberIssue, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		n, ok := tok.(json.Number)
		if !ok {
			continue
		}
		lit := string(n)
		c, err := jcsNumber(lit)
		if err != nil {
			return &numberIssue{lit: lit, lossy: true}, nil
		}
		if c == lit {
			continue
		}
		lossy := !sameDecimal(lit, c)
		if lossy || !lossyOnly {
			return &numberIssue{lit: lit, canon: c, lossy: lossy}, nil
		}
	}
}

var numberScanSeeds = []string{
	`{"a":1,"b":[0.5,-2,1e+21,1e-7]}`, `"1.0"`, `{"1.0":1}`, `{"a\"1.0":[2]}`, `["\\",1.0]`, `["\\\"",-0]`,
	`{"k":"x\u00221e400"}`, `[true,false,null,-0.0]`, `[123456789012345,1234567890123456,9007199254740993]`,
	`{"deep":{"x":[[[1E2]]]}}`, `"\u00e9 2.50"`, ` [ 1 , 2.0 ] `, `-0`, `0`, `1e2`,
}

// TestNumberScan: the byte scan finds what the decoder's tokens find, and
// refuses what is not one JSON value.
func TestNumberScan(t *testing.T) {
	for _, in := range numberScanSeeds {
		for _, lossy := range []bool{false, true} {
			got, err1 := firstNumberIssue([]byte(in), lossy)
			want, err2 := firstNumberIssueByTokens([]byte(in), lossy)
			if err1 != nil || err2 != nil || (got == nil) != (want == nil) || got != nil && *got != *want {
				t.Errorf("%s (lossy only %v): %+v %v, tokens %+v %v", in, lossy, got, err1, want, err2)
			}
		}
	}
	for _, in := range []string{``, `1 2`, `{"a":1`, `[1.]`, `"x`, `01`} {
		if _, err := firstNumberIssue([]byte(in), false); err == nil {
			t.Errorf("%q: taken", in)
		}
	}
}

// FuzzNumberScan holds the byte scan to the decoder's tokens on every
// valid JSON value.
func FuzzNumberScan(f *testing.F) {
	for _, s := range numberScanSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			if _, err := firstNumberIssue([]byte(in), false); err == nil {
				t.Fatalf("%q: not JSON, taken", in)
			}
			return
		}
		for _, lossy := range []bool{false, true} {
			got, err1 := firstNumberIssue([]byte(in), lossy)
			want, err2 := firstNumberIssueByTokens([]byte(in), lossy)
			if err1 != nil || err2 != nil || (got == nil) != (want == nil) || got != nil && *got != *want {
				t.Fatalf("%q (lossy only %v): %+v %v, tokens %+v %v", in, lossy, got, err1, want, err2)
			}
		}
	})
}

// BenchmarkNumberScan reads a task's 3 KB TASK_RESULT (two attestations)
// for numbers not in their JCS form: /scan is firstNumberIssue, /tokens
// the decoder's tokens it replaced.
func BenchmarkNumberScan(b *testing.B) {
	data, err := os.ReadFile("testdata/task_result.json")
	if err != nil {
		b.Fatal(err)
	}
	for name, f := range map[string]func([]byte, bool) (*numberIssue, error){"scan": firstNumberIssue, "tokens": firstNumberIssueByTokens} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			defer cputime.Report(b)()
			for b.Loop() {
				if is, err := f(data, false); is != nil || err != nil {
					b.Fatal(is, err)
				}
			}
		})
	}
}

// TestEd25519InputLocal: a locally built envelope's signing input (the JCS
// form of its MarshalJSON, which writes no signature) is the input a
// receiver computes from the bytes sent (less their signature member), for
// text JSON writers escape in different ways.
func TestEd25519InputLocal(t *testing.T) {
	e := submitEnvelope()
	e.Body.(*TaskSubmit).Input = json.RawMessage(`{"html":"<a href=\"x\">&amp;</a>","ls":"\u2028\u2029","emoji":"😀","esc":"\u0041\\\"","n":[1,0.5,-3e-7]}`)
	if err := SignEd25519(e, testKey(1)); err != nil {
		t.Fatal(err)
	}
	unsigned := *e
	unsigned.Signature = ""
	local, err := Ed25519Input(&unsigned)
	if err != nil {
		t.Fatal(err)
	}
	if signed, err := Ed25519Input(e); err != nil || !bytes.Equal(signed, local) {
		t.Fatalf("signed, local: %s (%v)", signed, err)
	}
	b, _ := json.Marshal(e)
	got, err := unsignedJCS(b)
	if err != nil || !bytes.Equal(got, local) {
		t.Fatalf("local input\n%s\nreceiver's\n%s (%v)", local, got, err)
	}
	p, err := ParseEnvelope(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyEd25519(p, testDID(1)); err != nil {
		t.Fatal(err)
	}
}
