package main

import (
	"go.uber.org/zap"

	"github.com/delegateos/delegateos/tracing"
)

// openTracing sets up OpenTelemetry tracing from the OTEL_* environment
// (docs/operations.md, tracing.Open) and says where spans go.
func openTracing(log *zap.Logger) (*tracing.Tracing, func(), error) {
	version, _ := buildVersion()
	t, closeTracing, err := tracing.Open("delegateos", version, log)
	if t != nil {
		log.Info("tracing on", zap.String("otlp_endpoint", t.Endpoint), zap.String("otlp_protocol", t.Protocol))
	}
	return t, closeTracing, err
}
