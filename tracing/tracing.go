// Package tracing sets up OpenTelemetry tracing from the standard OTEL_*
// environment variables: spans are exported over OTLP (HTTP with protobuf,
// or gRPC) when an OTLP endpoint is configured, and tracing is off
// otherwise.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of delegateos's spans.
const ScopeName = "github.com/delegateos/delegateos"

// Tracing is a configured tracer provider.
type Tracing struct {
	// Tracer starts delegateos's spans.
	Tracer   trace.Tracer
	provider *sdktrace.TracerProvider
	// Endpoint and Protocol say where spans go, for the start-up log.
	Endpoint, Protocol string
}

// Shutdown exports the spans still queued and stops the exporter; ctx
// bounds how long it waits for the collector.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Enabled reports whether the environment asks for traces: an OTLP
// endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER is "otlp",
// and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none says
// otherwise.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return false
	case "otlp":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// FromEnv sets up tracing as the OTEL_* environment says; it returns nil
// (and no error) when tracing is off. service names the program in the
// resource (OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override it),
// version is its version. The exporters read the endpoint, headers,
// timeout, TLS and compression settings from the environment themselves;
// the SDK reads OTEL_TRACES_SAMPLER and the OTEL_BSP_* batch settings.
func FromEnv(ctx context.Context, service, version string) (*Tracing, error) {
	if !Enabled(os.Getenv) {
		return nil, nil
	}
	exp := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))
	if exp != "" && exp != "otlp" && exp != "none" {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: delegateos exports traces only over OTLP (otlp) or not at all (none)", exp)
	}
	protocol := strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if protocol == "" {
		protocol = strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	if protocol == "" {
		protocol = "http/protobuf" // the specification's default
	}
	var (
		exporter sdktrace.SpanExporter
		err      error
	)
	switch protocol {
	case "http/protobuf":
		exporter, err = otlptracehttp.New(ctx)
	case "grpc":
		exporter, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("OTLP protocol %q: use http/protobuf or grpc", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("the OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(
		resource.NewSchemaless(attribute.String("service.name", service), attribute.String("service.version", version)),
		mustResource(resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK())),
	)
	if err != nil {
		return nil, fmt.Errorf("the trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	endpoint := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	return &Tracing{Tracer: tp.Tracer(ScopeName, trace.WithInstrumentationVersion(version)), provider: tp, Endpoint: endpoint, Protocol: protocol}, nil
}

// mustResource keeps a resource that resource.New returned with a partial
// error (an OTEL_RESOURCE_ATTRIBUTES entry it could not read): the rest
// still describes the process.
func mustResource(r *resource.Resource, err error) *resource.Resource {
	if err != nil && !errors.Is(err, resource.ErrPartialResource) && r == nil {
		return resource.Empty()
	}
	return r
}
