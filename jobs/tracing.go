package jobs

import (
	"context"
	"encoding/json"

	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"inventory/store"
	"inventory/tracing"
)

// riverTracing is River's own OpenTelemetry middleware (rivercontrib's
// otelriver, maintained with River) when tracing is on: a span for each
// insert and each job worked, the work span linked to the span that
// inserted the job through the job's metadata. None when tracing is off,
// so an untraced server runs River exactly as before. Its metrics are off:
// the server's own Prometheus metrics count jobs already.
func riverTracing(tr *tracing.Tracing) []rivertype.Middleware {
	if tr == nil || !tr.Enabled {
		return nil
	}
	return []rivertype.Middleware{otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
		TracerProvider: tr.Provider, MeterProvider: metricnoop.NewMeterProvider(),
		EnableTracePropagation: true, EnableWorkSpanJobKindSuffix: true,
	})}
}

// reserveTraceKey is the job metadata key holding the trace context of the
// reserve that made a hold. otelriver's own "traceparent" names the insert,
// which for a coalesced reserve is the batch's; this names the request.
const reserveTraceKey = "reserve_traceparent"

// holdMetadata is an expiry job's metadata: the reserve's trace context,
// nil when the reserve was not traced.
func holdMetadata(h store.HoldDeadline) []byte {
	if h.TraceParent == "" {
		return nil
	}
	b, _ := json.Marshal(map[string]string{reserveTraceKey: h.TraceParent})
	return b
}

// linkReserve links the span working an expiry job to the reserve that made
// its hold, when both are traced.
func linkReserve(ctx context.Context, metadata []byte) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() || len(metadata) == 0 {
		return
	}
	var m map[string]any
	if json.Unmarshal(metadata, &m) != nil {
		return
	}
	if tp, _ := m[reserveTraceKey].(string); tp != "" {
		if link, ok := tracing.LinkTo(tp); ok {
			span.AddLink(link)
		}
	}
}

// startDeliverySpan starts the span of one webhook post, on the tracer of
// the job's span (the no-op one when tracing is off). It names the endpoint
// by id and the topic, never the URL: a receiver's URL may carry its own
// token.
func startDeliverySpan(ctx context.Context, t store.WebhookTarget, a store.WebhookAttempt) (context.Context, trace.Span) {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer(tracing.ScopeName).Start(ctx, "webhook deliver",
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String("inventory.webhook.endpoint_id", t.ID), attribute.String("inventory.webhook.topic", a.Topic)))
}

// endDeliverySpan records how the receiver answered.
func endDeliverySpan(span trace.Span, status int, err error) {
	if status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	if err != nil {
		span.SetStatus(codes.Error, "delivery failed")
	}
}
