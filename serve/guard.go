package serve

import (
	"net/http"

	"go.uber.org/zap"
)

// Guard wraps a handler mounted on Mux beside the MCP endpoint with the
// endpoint's Host and Origin checks (DNS-rebinding protection).
func (s *Server) Guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := s.hosts.check(r.Host, r.Header.Values("Origin")); why != "" {
			s.log.Warn("request refused", zap.String("reason", why), zap.String("host", r.Host), zap.Strings("origin", r.Header.Values("Origin")))
			httpError(w, http.StatusForbidden, nil, why)
			return
		}
		h.ServeHTTP(w, r)
	})
}
