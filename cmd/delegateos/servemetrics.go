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

// listenMetrics takes the listener of --metrics-listen addr. serve calls
// it with its own address, before the audit log is opened, so that a bad
// or busy address stops serve at start with nothing written to the log.
func listenMetrics(addr string) (net.Listener, error) {
	if _, err := serve.HostGuard(addr, nil, nil, nil); err != nil {
		return nil, fixf("--metrics-listen %s: %v; give HOST:PORT, e.g. 127.0.0.1:9090, or %s", addr, err, metricsOff)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, inputf("--metrics-listen %s: %v", addr, err)
	}
	return ln, nil
}

// serveMetrics serves /metrics, and POST /reload (reload; nil for none),
// on ln (listenMetrics(addr)), with the Host and Origin checks of a bind
// to addr and the server's --allow-host and --allow-origin, until the
// process exits.
//
// Reload is here and never beside the MCP endpoint: whoever reaches the
// endpoint is a client the gate guards against, while this listener is
// the operator's (an internal interface, like the scrape target). A
// reload only reads files the operator wrote, so a caller can at most
// make the server read them again; a browser's cross-site POST is refused
// by the Origin check.
func serveMetrics(addr string, ln net.Listener, m *metrics.Metrics, reload http.Handler, opts *serve.Options, log *zap.Logger) error {
	guard, err := serve.HostGuard(addr, opts.AllowHosts, opts.AllowOrigins, log)
	if err != nil {
		return fixf("--metrics-listen %s: %v; give HOST:PORT, e.g. 127.0.0.1:9090, or %s", addr, err, metricsOff)
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
