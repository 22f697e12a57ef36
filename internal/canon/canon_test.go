package canon

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// trickyStrings are the inputs where a hand-written encoder is most likely to
// part from encoding/json + JCS.
var trickyStrings = func() []string {
	s := []string{
		"",
		"plain ASCII",
		`"`, `\`, `\"`, `"\"`, `a"b\c`,
		"/", "</script>",
		"<", ">", "&", "<>&", // encoding/json escapes these as \u003c etc.; JCS must not
		"\x7f", "a\x7fb", // DEL is not a control character to JSON
		"\u0080", "\u009f", // C1 controls are written raw
		"\u2028", "\u2029", "a\u2028b\u2029c", // encoding/json escapes these; JCS must not
		"\ufeff", "\uffff", "\ufffd",
		"é", "e\u0301", "€", "\ufb33", "\u05d3\u05bc", "日本語",
		"😀", "👩‍👩‍👧", "\U0010ffff",
		"\xff",             // invalid byte
		"a\xffb",           // invalid byte inside ASCII
		"\xc3",             // truncated 2-byte sequence
		"\xe2\x82",         // truncated 3-byte sequence
		"\xf0\x9f\x98",     // truncated 4-byte sequence
		"\xc0\xaf",         // overlong '/'
		"\xe0\x80\xaf",     // overlong '/' in 3 bytes
		"\xed\xa0\x80",     // UTF-8 encoded surrogate U+D800
		"\xed\xbf\xbf",     // UTF-8 encoded surrogate U+DFFF
		"\xf4\x90\x80\x80", // above U+10FFFF
		"\x80\x80\x80",     // lone continuation bytes
		"é\xffé",
		"\xff\"\x00", // invalid byte next to escapes
	}
	for c := 0; c < 0x20; c++ {
		s = append(s, string(rune(c)), "x"+string(rune(c))+"y")
	}
	var all strings.Builder
	for c := 0; c < 0x80; c++ {
		all.WriteByte(byte(c))
	}
	return append(s, all.String())
}()

// marshalString is the reference: encoding/json followed by JCS.
func marshalString(t testing.TB, s string) []byte {
	t.Helper()
	want, err := Marshal(s)
	if err != nil {
		t.Fatalf("Marshal(%q): %v", s, err)
	}
	return want
}

func TestAppendStringMatchesMarshal(t *testing.T) {
	for _, s := range trickyStrings {
		want := marshalString(t, s)
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = %q, Marshal = %q", s, got, want)
		}
	}
}

func TestAppendStringExact(t *testing.T) {
	// Spelled out so a change to both sides at once still fails.
	tests := []struct{ in, want string }{
		{"", `""`},
		{"\x00", `"\u0000"`},
		{"\x1f", `"\u001f"`},
		{"\x0b", `"\u000b"`},
		{"\b\t\n\f\r", `"\b\t\n\f\r"`},
		{`"\`, `"\"\\"`},
		{"/", `"/"`},
		{"<>&", `"<>&"`},
		{"\x7f", "\"\x7f\""},
		{"\u2028\u2029", "\"\u2028\u2029\""},
		{"😀", `"😀"`},
		{"a\xffb", "\"a\ufffdb\""},
		{"\xed\xa0\x80", "\"\ufffd\ufffd\ufffd\""},
	}
	for _, tt := range tests {
		if got := string(AppendString(nil, tt.in)); got != tt.want {
			t.Errorf("AppendString(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestAppendStringAppends(t *testing.T) {
	dst := []byte(`{"k":`)
	got := string(AppendString(dst, "v"))
	if got != `{"k":"v"` {
		t.Fatalf("AppendString kept prefix badly: %q", got)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := marshalString(t, s)
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %q, Marshal = %q", s, got, want)
		}
	})
}

func TestAppendIntMatchesMarshal(t *testing.T) {
	for _, n := range []int64{0, 1, -1, 9, 10, 99, 100, 1e15, MaxSafeInteger - 1, MaxSafeInteger, -MaxSafeInteger} {
		want, err := Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendInt(nil, n); !bytes.Equal(got, want) {
			t.Errorf("AppendInt(%d) = %s, Marshal = %s", n, got, want)
		}
	}
}

// RFC 8785 §3.2.2: the example of string, number and literal serialization.
func TestMarshalRFC8785Sample(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	var v any
	if err := json.Unmarshal([]byte(in), &v); err != nil {
		t.Fatal(err)
	}
	got, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("Marshal =\n%s\nwant\n%s", got, want)
	}
}

// RFC 8785 §3.2.3: members sort by UTF-16 code units, so U+1F600 (a
// surrogate pair starting 0xD83D) sorts before U+FB33.
func TestMarshalRFC8785Sorting(t *testing.T) {
	v := map[string]string{
		"\u20ac":     "Euro Sign",
		"\r":         "Carriage Return",
		"\ufb33":     "Hebrew Letter Dalet With Dagesh",
		"1":          "One",
		"\U0001f600": "Emoji: Grinning Face",
		"\u0080":     "Control",
		"\u00f6":     "Latin Small Letter O With Diaeresis",
	}
	want := `{"\r":"Carriage Return","1":"One","` + "\u0080" + `":"Control","ö":"Latin Small Letter O With Diaeresis",` +
		`"€":"Euro Sign","😀":"Emoji: Grinning Face","` + "\ufb33" + `":"Hebrew Letter Dalet With Dagesh"}`
	got, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("Marshal =\n%s\nwant\n%s", got, want)
	}
}

// RFC 8785 Appendix B: number serialization samples, as IEEE 754 bit patterns.
func TestMarshalRFC8785Numbers(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"}, // minus zero
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range tests {
		f := math.Float64frombits(tt.bits)
		got, err := Marshal(f)
		if err != nil {
			t.Errorf("Marshal(%016x): %v", tt.bits, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("Marshal(%016x) = %s, want %s", tt.bits, got, tt.want)
		}
	}
	// Appendix B's NaN and Infinity have no JSON form: they must be refused.
	for _, bits := range []uint64{0x7fffffffffffffff, 0x7ff0000000000000, 0xfff0000000000000} {
		if got, err := Marshal(math.Float64frombits(bits)); err == nil {
			t.Errorf("Marshal(%016x) = %s, want an error", bits, got)
		}
	}
}

func TestMarshalRefusesUnencodable(t *testing.T) {
	for _, v := range []any{make(chan int), func() {}, map[bool]int{true: 1}} {
		if got, err := Marshal(v); err == nil {
			t.Errorf("Marshal(%T) = %s, want an error", v, got)
		}
	}
}
