package main

import (
	"errors"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/metrics"
	"github.com/delegateos/delegateos/serve"
)

// metricsOff is the --metrics-listen value that serves no metrics.
const metricsOff = "off"

// serveMetrics serves /metrics, and POST /reload (reload; nil for none),
// on a listener of its own at addr (from --metrics-listen), with the Host
// and Origin checks of a bind to addr and the server's --allow-host and
// --allow-origin. It listens before it returns, so that a bad address
// stops serve at start, and serves until the process exits.
//
// Reload is here and never beside the MCP endpoint: whoever reaches the
// endpoint is a client the gate guards against, while this listener is
// the operator's (an internal interface, like the scrape target). A
// reload only reads files the operator wrote, so a caller can at most
// make the server read them again; a browser's cross-site POST is refused
// by the Origin check.
func serveMetrics(addr string, m *metrics.Metrics, reload http.Handler, opts *serve.Options, log *zap.Logger) error {
	guard, err := serve.HostGuard(addr, opts.AllowHosts, opts.AllowOrigins, log)
	if err != nil {
		return fixf("--metrics-listen %s: %v; give HOST:PORT, e.g. 127.0.0.1:9090, or %s", addr, err, metricsOff)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return inputf("--metrics-listen %s: %v", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(metrics.Path, guard(m.Handler()))
	if reload != nil {
		mux.Handle(ReloadPath, guard(reload))
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10}
	log.Info("serving metrics", zap.String("address", ln.Addr().String()), zap.String("url", "http://"+ln.Addr().String()+metrics.Path))
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("the metrics listener stopped", zap.Error(err))
		}
	}()
	return nil
}
