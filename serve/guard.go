package serve

import (
	"net"
	"net/http"

	"go.uber.org/zap"
)

// Guard wraps a handler mounted on Mux beside the MCP endpoint with the
// endpoint's Host and Origin checks (DNS-rebinding protection).
func (s *Server) Guard(h http.Handler) http.Handler { return guard(s.hosts, s.log, h) }

// HostGuard returns the DNS-rebinding protection of a listener of its own
// at listen (HOST:PORT), such as one that serves only metrics: Host and
// Origin are checked as Guard checks them for the MCP listener, against
// the names a bind to listen's host accepts, allowHosts and allowOrigins.
func HostGuard(listen string, allowHosts, allowOrigins []string, log *zap.Logger) (func(http.Handler) http.Handler, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	hp := newHostPolicy(host, allowHosts, allowOrigins)
	return func(h http.Handler) http.Handler { return guard(hp, log, h) }, nil
}

func guard(hp *hostPolicy, log *zap.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := hp.check(r.Host, r.Header.Values("Origin")); why != "" {
			log.Warn("request refused", zap.String("reason", why), zap.String("host", r.Host), zap.Strings("origin", r.Header.Values("Origin")))
			httpError(w, http.StatusForbidden, nil, why)
			return
		}
		h.ServeHTTP(w, r)
	})
}
