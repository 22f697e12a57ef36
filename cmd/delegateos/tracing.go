package main

import (
	"context"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel"
	"go.uber.org/zap"

	"github.com/delegateos/delegateos/tracing"
)

// openTracing sets up OpenTelemetry tracing from the OTEL_* environment
// (docs/operations.md): nil and a no-op close when none is set. close
// exports the spans still queued, waiting at most 5s for the collector.
func openTracing(log *zap.Logger) (*tracing.Tracing, func(), error) {
	t, err := tracing.FromEnv(context.Background(), "delegateos", buildVersion())
	if err != nil || t == nil {
		return nil, func() {}, err
	}
	// The exporter's own errors (a collector that cannot be reached, say)
	// go to the log, not to the standard logger.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", zap.Error(err)) }))
	log.Info("tracing on", zap.String("otlp_endpoint", t.Endpoint), zap.String("otlp_protocol", t.Protocol))
	return t, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := t.Shutdown(ctx); err != nil {
			log.Warn("spans could not all be exported at exit", zap.Error(err))
		}
	}, nil
}

// buildVersion is the module version the binary was built as, or
// "(devel)" for a build from a checkout.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// buildRevision is the VCS revision the binary was built from, or
// "unknown" when the build did not record one (-buildvcs=false).
func buildRevision() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}
