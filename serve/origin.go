package serve

import (
	"net"
	"net/url"
	"strings"
)

// hostPolicy decides which Host and Origin headers are accepted: the
// DNS-rebinding protection the MCP transport specification requires. A web
// page on evil.example.com that resolves its own name to 127.0.0.1 makes
// the browser send Host: evil.example.com and Origin: http://evil.example.com,
// which no allowed name matches.
type hostPolicy struct {
	anyHost bool
	hosts   map[string]bool // lower-case names and IP literals, without port or brackets
	origins map[string]bool // exact origins (scheme://host[:port]), lower case
}

// loopbackNames are the names of this machine every local bind accepts.
var loopbackNames = []string{"localhost", "127.0.0.1", "::1"}

// newHostPolicy builds the policy for a server listening on listenHost
// (the host part of --listen): a loopback or unspecified bind accepts the
// loopback names, a bind to a specific address accepts that address, and
// allowHosts ("*" accepts every Host) and allowOrigins add to them.
func newHostPolicy(listenHost string, allowHosts, allowOrigins []string) *hostPolicy {
	hp := &hostPolicy{hosts: map[string]bool{}, origins: map[string]bool{}}
	ip := net.ParseIP(strings.Trim(listenHost, "[]"))
	switch {
	case listenHost == "" || ip == nil && strings.EqualFold(listenHost, "localhost"):
		fallthrough
	case ip != nil && (ip.IsLoopback() || ip.IsUnspecified()):
		for _, n := range loopbackNames {
			hp.hosts[n] = true
		}
		if ip != nil && !ip.IsUnspecified() {
			hp.hosts[ip.String()] = true
		}
	default:
		hp.hosts[strings.ToLower(strings.Trim(listenHost, "[]"))] = true
	}
	for _, h := range allowHosts {
		if h == "*" {
			hp.anyHost = true
			continue
		}
		hp.hosts[strings.ToLower(strings.Trim(h, "[]"))] = true
	}
	for _, o := range allowOrigins {
		hp.origins[strings.ToLower(strings.TrimRight(o, "/"))] = true
	}
	return hp
}

// hostName is the name in a Host header or URL host, without port or
// IPv6 brackets, lower case; "" when it cannot be read.
func hostName(hostport string) string {
	if hostport == "" || strings.ContainsAny(hostport, " \t/\\@?#") {
		return ""
	}
	h := hostport
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return ""
		}
		rest := h[end+1:]
		if rest != "" && (rest[0] != ':' || !allDigits(rest[1:])) {
			return ""
		}
		h = h[1:end]
	} else if i := strings.LastIndexByte(h, ':'); i >= 0 {
		if strings.Count(h, ":") > 1 || !allDigits(h[i+1:]) {
			return ""
		}
		h = h[:i]
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	return h
}

func allDigits(s string) bool {
	if s == "" || len(s) > 5 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// check returns "" when a request with these Host and Origin headers may
// proceed, or why not.
func (hp *hostPolicy) check(host string, origins []string) string {
	if !hp.anyHost {
		if n := hostName(host); n == "" || !hp.hosts[n] {
			return "the Host header names a host this server does not answer for"
		}
	}
	if len(origins) > 1 {
		return "more than one Origin header"
	}
	if len(origins) == 0 {
		return "" // not a browser: no cross-origin page is involved
	}
	o := strings.ToLower(origins[0])
	if hp.origins[strings.TrimRight(o, "/")] {
		return ""
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "the Origin header is not an allowed origin"
	}
	if n := hostName(u.Host); n == "" || !hp.hosts[n] {
		return "the Origin header is not an allowed origin"
	}
	return ""
}

// HostAllowed reports whether a Host header names a host this server
// answers for (the listen address, the loopback names, AllowHosts):
// handlers mounted on Mux beside the MCP endpoint check it against DNS
// rebinding, as the endpoint does.
func (s *Server) HostAllowed(host string) bool { return s.hosts.check(host, nil) == "" }
