package proxy

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func TestLineSafe(t *testing.T) {
	for _, tc := range []struct{ in, out, reason string }{
		{`{"a":"x"}`, `{"a":"x"}`, ""},
		{"{\"a\":\"x\u2028y\u2029z\u0085\"}", `{"a":"x\u2028y\u2029z\u0085"}`, ""},
		{"{\"a\u2028\":\"\\\"\u2028\"}", `{"a\u2028":"\"\u2028"}`, ""},
		{"{\"a\":\"é\"}", "{\"a\":\"é\"}", ""},
		{"{\"a\":1\u2028}", "", "outside a string"},
		{"{\"a\":\"\\\u2028\"}", "", "outside a string"},
		{"{\"a\":\"x\"}\r", "", "carriage return"},
		{"{\"a\":\"\xff\"}", "", "UTF-8"},
	} {
		out, reason := lineSafe([]byte(tc.in))
		if string(out) != tc.out || (tc.reason == "") != (reason == "") || !bytes.Contains([]byte(reason), []byte(tc.reason)) {
			t.Errorf("lineSafe(%q) = %q, %q; want %q, %q", tc.in, out, reason, tc.out, tc.reason)
		}
	}
}

// FuzzLineSafe: what lineSafe passes has no character a line reader
// splits at, and is JSON exactly when its input is, with the same value.
func FuzzLineSafe(f *testing.F) {
	for _, s := range []string{"{\"a\":\"x\u2028\"}", "[\"\\\\\u2029\",\"\u0085\"]", "{\"\u2028\":1}", "\"\\\u2028\"", "1\u2028"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, reason := lineSafe(in)
		if reason != "" {
			return
		}
		if bytes.IndexByte(out, '\r') >= 0 || hasSeparator(out) {
			t.Fatalf("lineSafe(%q) passed %q", in, out)
		}
		if json.Valid(in) != json.Valid(out) {
			t.Fatalf("lineSafe(%q) = %q: valid JSON %v, was %v", in, out, json.Valid(out), json.Valid(in))
		}
		if json.Valid(in) {
			var a, b any
			_ = json.Unmarshal(in, &a)
			_ = json.Unmarshal(out, &b)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("lineSafe(%q) = %q: another value", in, out)
			}
		}
	})
}
