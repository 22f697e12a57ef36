package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.uber.org/zap"
)

// Open sets up tracing as FromEnv does and sends the exporter's own errors
// (a collector that cannot be reached, say) to log rather than to the
// standard logger. It returns nil and a no-op close when tracing is off;
// close exports the spans still queued, waiting at most 5s for the
// collector, and logs what could not be exported.
func Open(service, version string, log *zap.Logger) (*Tracing, func(), error) {
	t, err := FromEnv(context.Background(), service, version)
	if err != nil || t == nil {
		return nil, func() {}, err
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", zap.Error(err)) }))
	return t, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := t.Shutdown(ctx); err != nil {
			log.Warn("spans could not all be exported at exit", zap.Error(err))
		}
	}, nil
}
