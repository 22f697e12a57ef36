package proxy

import "testing"

// A receipt's arguments for a vendor method or completion/complete are
// the params as forwarded: _delegateos, wherever it stands, cut out with
// one comma, as forwardEdits cut it.
func TestForwardedParams(t *testing.T) {
	for in, want := range map[string]string{
		`{"q":1}`:                            `{"q":1}`,
		`{"_delegateos":{"dct":"x"},"q":1}`:  `{"q":1}`,
		`{"q":1,"_delegateos":{"dct":"x"}}`:  `{"q":1}`,
		`{"q":1, "_DelegateOS":{} ,"r":[2]}`: `{"q":1 ,"r":[2]}`,
		`{"_delegateos":{"dct":"x"}}`:        `{}`,
	} {
		cp, err := readCallParams([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := string(forwardedParams([]byte(in), &cp)); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	if forwardedParams(nil, &callParams{}) != nil {
		t.Error("no params: want nil")
	}
}
