// Package tracing turns the standard OTEL_* environment into an
// OpenTelemetry tracer provider, and carries a span's W3C trace context
// through places a context cannot go: a River job's row, a webhook request.
//
// It is off unless an OTLP endpoint is named (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER=otlp. Off, the
// provider is OpenTelemetry's no-op one and the server installs none of its
// instrumentation (no HTTP, SQL or job wrappers), so tracing costs nothing
// when it is not wanted.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ServiceName is the service.name of our spans unless OTEL_SERVICE_NAME (or
// service.name in OTEL_RESOURCE_ATTRIBUTES) says otherwise.
const ServiceName = "inventory"

// Tracing is the server's tracer provider and how to flush it at shutdown.
type Tracing struct {
	// Provider makes every tracer of the server: the SDK's when Enabled,
	// else the no-op provider.
	Provider trace.TracerProvider
	// Enabled says whether spans are recorded and exported; when false the
	// server wires no instrumentation at all.
	Enabled bool
	sdk     *sdktrace.TracerProvider
}

// Off is tracing disabled: a no-op provider and nothing to flush.
func Off() *Tracing { return &Tracing{Provider: noop.NewTracerProvider()} }

// FromEnv starts tracing as the OTEL_* variables that lookup reads say:
// Off when none asks for an exporter. The exporter, the sampler
// (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG) and the batch processor
// (OTEL_BSP_*) read their own variables from the process environment, as
// every OpenTelemetry SDK does. Only OTLP over HTTP (protobuf) is built in:
// a collector listens for it on port 4318.
func FromEnv(ctx context.Context, lookup func(string) (string, bool), version string) (*Tracing, error) {
	on, err := wanted(lookup)
	if err != nil || !on {
		return Off(), err
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): %w", err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res),
		sdktrace.WithRawSpanLimits(spanLimits(lookup)))
	return &Tracing{Provider: sdk, Enabled: true, sdk: sdk}, nil
}

// MaxAttributeBytes bounds each attribute value of our spans unless
// OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT (or its span-only spelling) says
// otherwise. OpenTelemetry's own default is no bound, and otelhttp copies
// request headers (User-Agent, Host) into attributes: a caller's 1 MB
// header would be a 1 MB span held in the export queue, 2,048 of them
// gigabytes, and an export over the collector's size limit loses every
// span of its batch.
const MaxAttributeBytes = 1024

// spanLimits are the SDK's limits from the environment, with
// MaxAttributeBytes where the environment sets no value length.
func spanLimits(lookup func(string) (string, bool)) sdktrace.SpanLimits {
	limits := sdktrace.NewSpanLimits()
	_, a := lookup("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT")
	_, b := lookup("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT")
	if !a && !b {
		limits.AttributeValueLengthLimit = MaxAttributeBytes
	}
	return limits
}

// wanted says whether the environment asks for traces, and refuses what
// this build cannot do rather than silently exporting nothing.
func wanted(lookup func(string) (string, bool)) (bool, error) {
	get := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	exporter := strings.ToLower(get("OTEL_TRACES_EXPORTER"))
	switch exporter {
	case "none":
		return false, nil
	case "", "otlp":
	default:
		return false, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: this server exports only otlp (or none)", exporter)
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := get(k); p != "" && p != "http/protobuf" {
			return false, fmt.Errorf("tracing: %s=%q: this server sends OTLP over http/protobuf only (a collector's port 4318)", k, p)
		}
	}
	return exporter == "otlp" || get("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
}

// Shutdown exports the spans still buffered and stops the exporter; a
// no-op when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.sdk == nil {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}

// ScopeName is the instrumentation scope of the server's own spans (the
// HTTP, SQL and River libraries name theirs).
const ScopeName = "inventory"
