package serve

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os/exec"
)

// reservedUpstreamHeaders are the headers the bridge to an upstream server
// writes itself (MCP's transport and HTTP's framing).
var reservedUpstreamHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Content-Type": true, "Accept": true, "Connection": true,
	"Transfer-Encoding": true, "Te": true, "Upgrade": true, "Trailer": true, "Keep-Alive": true,
	"Mcp-Session-Id": true, "Mcp-Protocol-Version": true, "Last-Event-Id": true,
}

// ReservedUpstreamHeader reports whether Bridge (and Upstream) writes the
// header name itself: a header given to them under that name is not
// theirs to send, and is refused by callers.
func ReservedUpstreamHeader(name string) bool {
	return reservedUpstreamHeaders[http.CanonicalHeaderKey(name)]
}

// UpstreamReady is an Options.UpstreamReady: for an upstream command
// (args, with upstreamURL ""), that it can still be found and run; for an
// upstream server at upstreamURL, an http or https URL, that it accepts a
// connection.
func UpstreamReady(args []string, upstreamURL string) func(context.Context) error {
	if upstreamURL == "" {
		return func(context.Context) error {
			_, err := exec.LookPath(args[0])
			return err
		}
	}
	u, _ := url.Parse(upstreamURL) // checked at start
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
}
