package main

import (
	"os"
	"strings"
	"testing"
)

// FuzzParseHeaderLines: the --upstream-headers file is read without a
// panic; every header it yields is one line, and upstreamHeaders accepts
// only names that are HTTP tokens and values without line breaks.
func FuzzParseHeaderLines(f *testing.F) {
	for _, seed := range []string{
		"Authorization: Bearer x\n", "# c\n\nX-A: 1\r\nX-B:2", "no colon\n", ": empty name\n",
		"X: a\x00b\n", "Mcp-Session-Id: s\n", strings.Repeat("X-Long: y\n", 50),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		hs, err := parseHeaderLines(data)
		if err != nil {
			return
		}
		for _, kv := range hs {
			if strings.ContainsAny(kv[0]+kv[1], "\n") {
				t.Fatalf("a header of two lines: %q", kv)
			}
		}
		path := t.TempDir() + "/h"
		if err := writeFileForTest(path, data); err != nil {
			t.Fatal(err)
		}
		h, err := upstreamHeaders(path, nil, func(string) string { return "" })
		if err != nil {
			return
		}
		for k, vs := range h {
			if !validHeaderName(k) || bridgeHeaders[k] {
				t.Fatalf("header name %q accepted", k)
			}
			for _, v := range vs {
				if v == "" || strings.ContainsAny(v, "\r\n\x00") {
					t.Fatalf("header value %q accepted", v)
				}
			}
		}
	})
}

func writeFileForTest(path string, data []byte) error { return os.WriteFile(path, data, 0o600) }
