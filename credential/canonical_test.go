package credential

import "testing"

// TestCanonicalRFC8785 holds the canonical form credentials are hashed in
// to the examples of RFC 8785 (§3.2.2, §3.2.3, Appendix B): numbers in
// ECMAScript form, strings with only the required escapes, members sorted
// by UTF-16 code units.
func TestCanonicalRFC8785(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
		   "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
		   "literals": [null, true, false]}`,
			`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		{`{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh",
		   "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control",
		   "\u00f6": "Latin Small Letter O With Diaeresis"}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		{`{"n": [0, -0, 5e-324, 1.7976931348623157e308, 9007199254740991,
		   9.999999999999997e22, 0.000001, 9.999999999999997e-7, 1e21, 333333333.3333332, -1.5, 100.0]}`,
			`{"n":[0,0,5e-324,1.7976931348623157e+308,9007199254740991,9.999999999999997e+22,0.000001,9.999999999999997e-7,1e+21,333333333.3333332,-1.5,100]}`},
		{`{"s": "<&>\u2028\u007f\u001f é"}`, "{\"s\":\"<&>\u2028\u007f\\u001f é\"}"},
	}
	for _, tt := range tests {
		o, err := parseObject([]byte(tt.in))
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		got, err := canonical(o)
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("canonical(%s)\n got %s\nwant %s", tt.in, got, tt.want)
		}
	}
}

// TestParseStrict refuses what two readers could read differently.
func TestParseStrict(t *testing.T) {
	for _, in := range []string{
		`{"a": 1, "a": 2}`,
		`{"a": {"b": 1, "b": 1}}`,
		`{"a": "\ud800"}`,
		"{\"a\": \"\xff\"}",
		`{"a": 12345678901234567890}`,
		`{"a": 1e400}`,
		// Canonical as the integer literal 295147905179352830000, which a
		// reader with exact integers takes for another value.
		`{"a": 2.9514790517935283e20}`,
		`{"a": 1} {}`,
		`[1]`,
		`"x"`,
		`{"a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
		string(make([]byte, MaxSize+1)),
	} {
		if _, err := parseObject([]byte(in)); !isKind(err, ErrMalformed) {
			t.Errorf("parseObject(%.60q): %v, want ErrMalformed", in, err)
		}
	}
}
