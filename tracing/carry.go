package tracing

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TraceParent is the W3C traceparent of ctx's span, for a place a context
// cannot reach (a River job's row, a webhook request); "" when ctx has no
// recorded span, which is always so with tracing off.
func TraceParent(ctx context.Context) string {
	return TraceParentOf(trace.SpanContextFromContext(ctx))
}

// TraceParentOf is sc as a W3C traceparent, "" when sc is invalid.
func TraceParentOf(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	return c["traceparent"]
}

// LinkTo is a link to the span a traceparent names (TraceParent's
// output); false when it names none.
func LinkTo(traceparent string) (trace.Link, bool) {
	if traceparent == "" {
		return trace.Link{}, false
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	sc := trace.SpanContextFromContext(ctx)
	return trace.Link{SpanContext: sc}, sc.IsValid()
}
