package budget

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestEntryRoundTrip(t *testing.T) {
	tests := []entry{
		{op: opTotal, delta: 1, keys: []string{"a"}},
		{op: opTotal, delta: math.MaxInt64, keys: []string{"ISSUER/del_root"}},
		{op: opReserve, id: 1, delta: 2500, keys: []string{"ISSUER/del_root", "ISSUER/del_root/del_a"}},
		{op: opReserve, id: math.MaxUint64, delta: 1, keys: []string{"a"}},
		{op: opCommit, id: 3, delta: -500, keys: []string{"a", "b"}},
		{op: opCommit, id: 3, delta: math.MinInt64 + 1, keys: []string{"a"}},
		{op: opCommit, id: 3, delta: 0, keys: []string{"a"}},
		{op: opRelease, id: 4, delta: -1, keys: []string{"a"}},
		{op: opReserve, id: 5, delta: 1, keys: []string{"quote\" back\\ nl\n tab\t nul\x00 del\x7f", "ünïcödé ✓ 𝄞", "<&>", "\u2028\u2029"}},
		{op: opReserve, id: 6, delta: 1, keys: []string{strings.Repeat("\x01", MaxKeyLen)}},
		{op: opReserve, id: 7, delta: 0, keys: []string{"a", "b"}, limits: []int64{math.MaxInt64, 0}, at: 1},
		{op: opReserve, id: 8, delta: 5, keys: []string{"a"}, limits: []int64{10}, at: maxAt},
		{op: opTotal, delta: 0, keys: []string{"a"}, limits: []int64{10}, calls: 1, at: 1767225600000},
		{op: opTotal, delta: 3, keys: []string{"a"}, limits: []int64{10}, calls: math.MaxInt64, at: 1767225600000},
	}
	for _, e := range tests {
		line := appendEntry(nil, e)
		if strings.IndexByte(string(line), '\n') != len(line)-1 {
			t.Errorf("%q: a newline inside the line", line)
		}
		got, err := parseEntry(line[:len(line)-1])
		if err != nil {
			t.Errorf("%q: %v", line, err)
			continue
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("%q read back as %+v", line, got)
		}
	}
}

func TestParseEntryRefuses(t *testing.T) {
	tests := []struct{ line, want string }{
		{`{"op":"total","id":1,"delta":1,"keys":["a"]}`, "a total has no reservation id"},
		{`{"op":"total","delta":1,"keys":["a","b"]}`, "a total names exactly one key"},
		{`{"op":"total","delta":0,"keys":["a"]}`, "a total cannot have a delta of 0"},
		{`{"op":"release","id":1,"delta":1,"keys":["a"]}`, "a release cannot have a delta of 1"},
		{`{"op":"release","delta":-1,"keys":["a"]}`, "a release needs a reservation id"},
		{`{"op":"reserve","id":-1,"delta":1,"keys":["a"]}`, "cannot unmarshal number -1"},
		{`{"op":"reserve","id":1,"delta":1e3,"keys":["a"]}`, "cannot unmarshal number 1e3"},
		{`{"op":"reserve","id":1,"delta":9223372036854775808,"keys":["a"]}`, "cannot unmarshal number 9223372036854775808"},
		{`{"op":"reserve","id":1,"delta":"1","keys":["a"]}`, "cannot unmarshal string"},
		{`{"op":"reserve","id":1,"delta":1,"keys":["a"]} {}`, "trailing data"},
		{`{"op":"reserve","id":1,"delta":1,"keys":[""]}`, "empty key"},
		{`{"op":"reserve","id":1,"delta":1,"keys":null}`, "0 keys"},
		{`{"op":"reserve","id":1,"delta":1,"keys":["\ud800"]}`, "unpaired UTF-16 surrogate"},
		{`{"op":"reserve","id":1,"delta":1,"keys":["` + strings.Repeat("k", MaxKeyLen+1) + `"]}`, "over the limit of 8192"},
		{`{"op":"reserve","id":1,"delta":1,"keys":[` + strings.Repeat(`"k",`, MaxLevels) + `"k"]}`, "65 keys"},
		{`null`, `unknown op ""`},
		{`[]`, "cannot unmarshal array"},
		{`{"op":"reserve","id":1,"delta":1,"keys":["` + strings.Repeat("k", maxLineLen) + `"]}`, "over the limit of"},
		{`{"op":"reserve","id":1,"delta":0,"keys":["a"]}`, "a reserve cannot have a delta of 0"},
		{`{"op":"reserve","id":1,"delta":1,"keys":["a"],"limits":[1]}`, "the time of a call is 0"},
		{`{"op":"reserve","id":1,"delta":1,"keys":["a"],"at":5}`, "0 limits for 1 keys"},
		{`{"op":"reserve","id":1,"delta":1,"keys":["a","b"],"limits":[1],"at":5}`, "1 limits for 2 keys"},
		{`{"op":"reserve","id":1,"delta":1,"keys":["a"],"limits":[-1],"at":5}`, "negative limit -1"},
		{`{"op":"reserve","id":1,"delta":1,"keys":["a"],"limits":[1],"at":-5}`, "the time of a call is -5"},
		{`{"op":"reserve","id":1,"delta":1,"keys":["a"],"limits":[1],"at":253402300800000}`, "outside 1..253402300799999"},
		{`{"op":"reserve","id":1,"delta":1,"keys":["a"],"limits":[1],"calls":1,"at":5}`, "a reserve has no count of calls"},
		{`{"op":"reserve","id":1,"delta":-1,"keys":["a"],"limits":[1],"at":5}`, "a reserve cannot have a delta of -1"},
		{`{"op":"total","delta":0,"keys":["a"],"limits":[1],"at":5}`, "needs a count of calls, not 0"},
		{`{"op":"total","delta":1,"keys":["a"],"calls":1}`, "the time of a call is 0"},
		{`{"op":"total","delta":1,"keys":["a"],"limits":[1],"calls":-1,"at":5}`, "needs a count of calls, not -1"},
		{`{"op":"total","delta":-1,"keys":["a"],"limits":[1],"calls":1,"at":5}`, "a total cannot have a delta of -1"},
		{`{"op":"commit","id":1,"delta":1,"keys":["a"],"limits":[1],"at":5}`, "a commit has no call's record"},
		{`{"op":"release","id":1,"delta":-1,"keys":["a"],"at":5}`, "a release has no call's record"},
		{`{"op":"reserve","id":1,"delta":1,"keys":["a"],"limits":[1.5],"at":5}`, "cannot unmarshal number 1.5"},
	}
	for _, tt := range tests {
		_, err := parseEntry([]byte(tt.line))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%.80s: %v, want an error containing %q", tt.line, err, tt.want)
		}
	}
}
