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

// serveMetrics serves /metrics on a listener of its own at addr (from
// --metrics-listen), with the Host and Origin checks of a bind to addr
// and the server's --allow-host and --allow-origin. It listens before it
// returns, so that a bad address stops serve at start, and serves until
// the process exits.
func serveMetrics(addr string, m *metrics.Metrics, opts *serve.Options, log *zap.Logger) error {
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
