package main

import (
	"net/http"
	"os"
	"strings"

	"github.com/delegateos/delegateos/serve"
)

// upstreamHeaders reads the --upstream-header values "NAME: VALUE", where
// VALUE is @FILE (the file's contents, less a final line ending) or $VAR
// (the environment variable, which is then removed from this process's
// environment) or the value itself. literal reports the names given a
// value on the command line, where every local user can read it.
func upstreamHeaders(specs []string) (h http.Header, literal []string, err error) {
	h = http.Header{}
	for _, spec := range specs {
		name, value, ok := strings.Cut(spec, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || !validHeaderName(name) {
			return nil, nil, fixf("--upstream-header %q: give NAME: VALUE, NAME: @FILE or NAME: $VAR, e.g. 'Authorization: @/etc/delegateos/upstream.token'", spec)
		}
		canon := http.CanonicalHeaderKey(name)
		if serve.ReservedUpstreamHeader(canon) {
			return nil, nil, fixf("--upstream-header %s: the bridge to the upstream sets this header itself", canon)
		}
		switch {
		case strings.HasPrefix(value, "@"):
			b, err := os.ReadFile(value[1:])
			if err != nil {
				return nil, nil, inputf("--upstream-header %s: %v", canon, err)
			}
			value = strings.TrimRight(string(b), "\r\n")
		case strings.HasPrefix(value, "$"):
			v, ok := os.LookupEnv(value[1:])
			if !ok {
				return nil, nil, fixf("--upstream-header %s: the environment variable %s is not set", canon, value[1:])
			}
			os.Unsetenv(value[1:])
			value = v
		default:
			literal = append(literal, canon)
		}
		if !validHeaderValue(value) {
			return nil, nil, fixf("--upstream-header %s: the value is not a valid header value (line breaks or control characters)", canon)
		}
		h.Add(canon, value)
	}
	return h, literal, nil
}

// validHeaderValue reports whether v is an HTTP field value (RFC 9110
// §5.5): no control characters but tab, so no line breaks.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
