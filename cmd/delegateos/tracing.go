package main

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.uber.org/zap"

	"github.com/delegateos/delegateos/tracing"
)

// openTracing sets up OpenTelemetry tracing from the OTEL_* environment
// (docs/operations.md): nil and a no-op close when none is set. close
// exports the spans still queued, waiting at most 5s for the collector.
func openTracing(log *zap.Logger) (*tracing.Tracing, func(), error) {
	version, _ := buildVersion()
	t, err := tracing.FromEnv(context.Background(), "delegateos", version)
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
