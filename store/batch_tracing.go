package store

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"inventory/tracing"
)

// A coalesced batch is traced as work done for several requests at once:
//
//   - each traced request waiting for a batch has a span of its own,
//     "<coalescer> batch wait", from queueing to its outcome, linked to the
//     batch that decided it and carrying that batch's size: a reserve that
//     waited 40 ms for its batch shows as such;
//   - the batch's span, "<coalescer> batch", links every traced request it
//     served, and its SQL statements are its children. It is a child of
//     the first traced request's wait, so it is sampled with that request
//     and a trace viewer shows it in place there; the others reach it by
//     their link.
//
// Untraced requests (tracing off, or not sampled) cost a nil check: no
// span, no context.

// batchSizeKey is the attribute naming how many requests a batch served.
const batchSizeKey = attribute.Key("inventory.batch.size")

// startWait starts q's wait span when ctx's span is recorded, and keeps its
// context as q's origin for the batch to link and parent from.
func (c *coalescer[T]) startWait(ctx context.Context, q *batchTurn) trace.Span {
	if c.tracer == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return nil
	}
	ctx, span := c.tracer().Start(ctx, c.name+" batch wait")
	q.origin = ctx
	return span
}

// endWait ends q's wait span. decided says q's done was observed, so its
// batch's span context and size are safely read (the leader wrote them
// before closing done).
func endWait(span trace.Span, q *batchTurn, decided bool) {
	if span == nil {
		return
	}
	switch b := q.batch; {
	case decided && b != nil:
		span.AddLink(trace.Link{SpanContext: b.span})
		span.SetAttributes(batchSizeKey.Int(b.size))
	case !decided:
		span.SetStatus(codes.Error, "gave up waiting for its batch")
	}
	span.End()
}

// startBatch starts the batch span of batch on ctx when any of its requests
// is traced, and records its span context on rb for their waits to link.
func (c *coalescer[T]) startBatch(ctx context.Context, batch []T, rb *runningBatch) (context.Context, trace.Span) {
	var parent context.Context
	var links []trace.Link
	for _, b := range batch {
		if o := b.turnOf().origin; o != nil {
			if parent == nil {
				parent = o
			}
			links = append(links, trace.Link{SpanContext: trace.SpanContextFromContext(o)})
		}
	}
	if parent == nil {
		return ctx, nil
	}
	// The batch runs on its own context (its deadline, its cancellation),
	// with only the first request's span as parent.
	_, span := c.tracer().Start(parent, c.name+" batch", trace.WithLinks(links...),
		trace.WithAttributes(batchSizeKey.Int(len(batch))))
	rb.span = span.SpanContext()
	return trace.ContextWithSpan(ctx, span), span
}

// traceParentOf is the W3C traceparent of q's wait span, "" when q is not
// traced: an expiry job carries it to link back to the reserve it ends.
func traceParentOf(q *batchTurn) string {
	if q.origin == nil {
		return ""
	}
	return tracing.TraceParent(q.origin)
}
