package serve

import (
	"mime"
	"strings"
	"testing"
)

// acceptsByParsing is accepts read the slow way: every listed type through
// mime.ParseMediaType.
func acceptsByParsing(header []string, want string) bool {
	major, _, _ := strings.Cut(want, "/")
	for _, h := range header {
		for _, part := range strings.Split(h, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err == nil && (mt == want || mt == "*/*" || mt == major+"/*") {
				return true
			}
		}
	}
	return false
}

// accepts and the Content-Type check read every header as
// mime.ParseMediaType does, also where Unicode case folding would not.
func TestAcceptsAsParsed(t *testing.T) {
	parts := []string{
		"application/json", "APPLICATION/JSON", "Application/Json", "application/*", "Application/*", "*/*",
		"text/event-stream", "TEXT/EVENT-STREAM", "text/*", "text/event-stream;q=0.9", "application/json ; charset=utf-8",
		"application/json;=bad", "applicationjson", "application/ json", "application/jſon", "text/event-ſtream",
		"\u212a/*", "application/jsonx", "*/json", "application/**", "", " ", ";", "a/b;c=d", "application /json",
		"application/json\x00", "*/*;q=0", "*/ *",
	}
	for _, want := range []string{"application/json", "text/event-stream"} {
		for _, a := range parts {
			for _, b := range parts {
				for _, h := range [][]string{{a}, {a + "," + b}, {a, b}, {" " + a + " ,\t" + b}} {
					if got, slow := accepts(h, want), acceptsByParsing(h, want); got != slow {
						t.Errorf("accepts(%q, %s) = %v, parsed: %v", h, want, got, slow)
					}
				}
			}
		}
	}
	for _, ct := range parts {
		got := asciiEqualFold(ct, "application/json") || isJSONMediaType(ct)
		if slow := isJSONMediaType(ct); got != slow {
			t.Errorf("Content-Type %q: %v, parsed: %v", ct, got, slow)
		}
	}
}

// FuzzAccepts: for any Accept header, accepts agrees with reading every
// listed type through mime.ParseMediaType, and so does the Content-Type
// check.
func FuzzAccepts(f *testing.F) {
	f.Add("application/json, text/event-stream")
	f.Add("APPLICATION/*;q=0.5, text/event-ſtream")
	f.Add("*/*")
	f.Fuzz(func(t *testing.T, h string) {
		for _, want := range []string{"application/json", "text/event-stream"} {
			if got, slow := accepts([]string{h}, want), acceptsByParsing([]string{h}, want); got != slow {
				t.Fatalf("accepts(%q, %s) = %v, parsed: %v", h, want, got, slow)
			}
		}
		if got, slow := asciiEqualFold(h, "application/json") || isJSONMediaType(h), isJSONMediaType(h); got != slow {
			t.Fatalf("Content-Type %q: %v, parsed: %v", h, got, slow)
		}
	})
}
