package tracing

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// MaxTraceStateBytes is how much of a caller's tracestate the server
// carries: the 512 characters W3C Trace Context asks every participant to
// propagate. Every span of the trace repeats the tracestate in the export,
// outside the attribute limit, and the header may hold 32 members of 512
// characters: a key's 16 KB tracestate made each of its spans 16 KB.
const MaxTraceStateBytes = 512

// maxTraceStateMember is the size above which a member is dropped first
// when the tracestate is too long (W3C Trace Context, "Mutating the
// tracestate Field").
const maxTraceStateMember = 128

// BoundTraceState keeps at most MaxTraceStateBytes of the remote span
// context's tracestate in ctx, as W3C Trace Context says to cut it: members
// longer than 128 characters go first, then members from the end, so the
// vendors that wrote short entries at the front keep theirs.
func BoundTraceState(ctx context.Context) context.Context {
	sc := trace.SpanContextFromContext(ctx)
	ts := sc.TraceState()
	if len(ts.String()) <= MaxTraceStateBytes {
		return ctx
	}
	type member struct{ key, value string }
	var short []member
	size := -1 // no comma before the first member
	ts.Walk(func(key, value string) bool {
		n := len(key) + 1 + len(value)
		if n > maxTraceStateMember {
			return true
		}
		if size+1+n > MaxTraceStateBytes {
			return false // this one and every one after it: cut from the end
		}
		short = append(short, member{key, value})
		size += 1 + n
		return true
	})
	var kept trace.TraceState
	for i := len(short) - 1; i >= 0; i-- { // Insert puts a member at the front
		var err error
		if kept, err = kept.Insert(short[i].key, short[i].value); err != nil {
			return ctx // cannot happen: each member was parsed from a valid tracestate
		}
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc.WithTraceState(kept))
}
