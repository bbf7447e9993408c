package tracing

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

func extracted(t *testing.T, tracestate string) context.Context {
	t.Helper()
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"tracestate":  tracestate,
	})
	if !trace.SpanContextFromContext(ctx).IsValid() {
		t.Fatal("the traceparent did not parse")
	}
	return ctx
}

// TestBoundTraceState: a tracestate within 512 characters is kept whole;
// a longer one loses its members over 128 characters, then members from
// the end, and never its trace.
func TestBoundTraceState(t *testing.T) {
	t.Parallel()
	big := func(i int) string {
		return fmt.Sprintf("k%02d%s=%s", i, strings.Repeat("a", 253), strings.Repeat("v", 256))
	}
	mid := func(i int) string { return fmt.Sprintf("m%02d=%s", i, strings.Repeat("v", 95)) } // 99 characters
	var members []string
	for i := range 30 {
		members = append(members, big(i))
	}
	cases := []struct {
		name, in, want string
	}{
		{"short, kept whole", "a=1,b=2", "a=1,b=2"},
		{"the longest, kept whole", "a=" + strings.Repeat("v", 256) + ",b=" + strings.Repeat("v", 249), "a=" + strings.Repeat("v", 256) + ",b=" + strings.Repeat("v", 249)},
		{"long members dropped first", "ours=keep," + strings.Join(members, ",") + ",last=kept", "ours=keep,last=kept"},
		{"then from the end", strings.Join([]string{mid(0), big(0), mid(1), mid(2), mid(3), mid(4), mid(5), "z=1"}, ","),
			strings.Join([]string{mid(0), mid(1), mid(2), mid(3), mid(4)}, ",")},
	}
	for _, c := range cases {
		in := extracted(t, c.in)
		if got := trace.SpanContextFromContext(in).TraceState().String(); got != c.in {
			t.Fatalf("%s: the SDK parsed %d characters of %d", c.name, len(got), len(c.in))
		}
		out := trace.SpanContextFromContext(BoundTraceState(in))
		if got := out.TraceState().String(); got != c.want || len(got) > MaxTraceStateBytes {
			t.Errorf("%s: kept %q (%d characters); want %q", c.name, got, len(got), c.want)
		}
		if !out.IsRemote() || out.TraceID() != trace.SpanContextFromContext(in).TraceID() || !out.IsSampled() {
			t.Errorf("%s: the span context changed: %+v", c.name, out)
		}
	}
}
