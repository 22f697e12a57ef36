package serve

import (
	"net/url"
	"strings"
	"testing"
)

func TestHostPolicy(t *testing.T) {
	local := newHostPolicy("127.0.0.1", nil, nil)
	named := newHostPolicy("0.0.0.0", []string{"mcp.example.com"}, []string{"https://app.example.com"})
	specific := newHostPolicy("10.1.2.3", nil, nil)
	for _, tc := range []struct {
		hp      *hostPolicy
		host    string
		origins []string
		ok      bool
	}{
		{local, "127.0.0.1:8931", nil, true},
		{local, "localhost:8931", nil, true},
		{local, "LOCALHOST.:8931", nil, true},
		{local, "[::1]:8931", nil, true},
		{local, "localhost", []string{"http://localhost:3000"}, true},
		{local, "localhost", []string{"https://127.0.0.1"}, true},
		{local, "evil.example.com", nil, false},
		{local, "127.0.0.1.evil.example.com", nil, false},
		{local, "localhost:8931", []string{"http://evil.example.com"}, false},
		{local, "localhost:8931", []string{"null"}, false},
		{local, "localhost:8931", []string{"http://localhost@evil.example.com"}, false},
		{local, "localhost:8931", []string{"http://localhost:80/path"}, false},
		{local, "localhost:8931", []string{"file://localhost"}, false},
		{local, "localhost:8931", []string{"http://localhost", "http://localhost"}, false},
		{local, "localhost:x", nil, false},
		{local, "[::1]x", nil, false},
		{local, "localhost:8931/", nil, false},
		{local, "", nil, false},
		{named, "mcp.example.com", nil, true},
		{named, "mcp.example.com:443", []string{"https://app.example.com"}, true},
		{named, "mcp.example.com", []string{"https://app.example.com.evil"}, false},
		{named, "10.0.0.1", nil, false},
		{specific, "10.1.2.3:8931", nil, true},
		{specific, "localhost:8931", nil, false},
	} {
		got := tc.hp.check(tc.host, tc.origins) == ""
		if got != tc.ok {
			t.Errorf("Host %q Origin %q: allowed %v, want %v", tc.host, tc.origins, got, tc.ok)
		}
	}
}

// FuzzHostCheck: whatever the headers, a request passes only if its Host
// names an allowed host and its Origin, if any, is on an allowed host.
func FuzzHostCheck(f *testing.F) {
	for _, s := range []string{"localhost:1", "[::1]:2", "evil.example.com", "127.0.0.1.", "LOCALHOST", "[::1", "a:b:c", "localhost:99999"} {
		f.Add(s, "http://"+s)
	}
	f.Add("localhost", "null")
	f.Add("localhost", "http://user@localhost")
	hp := newHostPolicy("127.0.0.1", nil, nil)
	f.Fuzz(func(t *testing.T, host, origin string) {
		if hp.check(host, nil) == "" {
			if n := hostName(host); !hp.hosts[n] {
				t.Fatalf("Host %q passed as %q", host, n)
			}
		}
		if hp.check("localhost", []string{origin}) == "" {
			u, err := url.Parse(strings.ToLower(origin))
			if err != nil || u.User != nil || !hp.hosts[hostName(u.Host)] {
				t.Fatalf("Origin %q passed", origin)
			}
		}
	})
}

func TestEventID(t *testing.T) {
	for _, s := range []string{"", "1", "-1-2", "1--2", "a-1", "1-a", "1-2-3", "0-9223372036854775807", "0-9223372036854775808"} {
		if _, _, ok := parseEventID(s); ok {
			t.Errorf("parseEventID(%q) accepted", s)
		}
	}
	if a, b, ok := parseEventID(string(appendEventID(nil, 7, 42))); !ok || a != 7 || b != 42 {
		t.Errorf("round trip: %d %d %v", a, b, ok)
	}
}
