package tracing

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func lookupOf(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// TestOffWithoutOTELSettings: with no OTEL_* setting no exporter starts (no
// goroutine is left behind) and no span is recorded.
func TestOffWithoutOTELSettings(t *testing.T) {
	t.Parallel()
	for _, env := range []map[string]string{
		{},
		{"OTEL_SERVICE_NAME": "shop"}, // naming the service asks for no exporter
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"},
	} {
		before := goleak.IgnoreCurrent()
		tr, err := FromEnv(context.Background(), lookupOf(env), "test")
		if err != nil {
			t.Fatalf("%v: %v", env, err)
		}
		if tr.Enabled {
			t.Fatalf("%v: tracing is on", env)
		}
		_, span := tr.Provider.Tracer(ScopeName).Start(context.Background(), "x")
		if span.IsRecording() || span.SpanContext().IsValid() {
			t.Fatalf("%v: a span was recorded", env)
		}
		span.End()
		if TraceParent(context.Background()) != "" {
			t.Fatal("a traceparent without a span")
		}
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		goleak.VerifyNone(t, before)
	}
}

// TestOnWithAnEndpoint: an endpoint turns it on; what this build cannot
// export is refused at start, not silently dropped.
func TestOnWithAnEndpoint(t *testing.T) {
	t.Parallel()
	for _, env := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"},
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
	} {
		on, err := wanted(lookupOf(env))
		if err != nil || !on {
			t.Fatalf("%v: on=%v err=%v", env, on, err)
		}
	}
	for env, want := range map[string]map[string]string{
		"grpc":    {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		"zipkin":  {"OTEL_TRACES_EXPORTER": "zipkin"},
		"console": {"OTEL_TRACES_EXPORTER": "console"},
	} {
		if _, err := wanted(lookupOf(want)); err == nil || !strings.Contains(err.Error(), "OTEL_") {
			t.Fatalf("%s: %v", env, err)
		}
	}
}

// TestTraceParentRoundTrip: what TraceParent writes, LinkTo reads back;
// garbage links nothing.
func TestTraceParentRoundTrip(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	link, ok := LinkTo(tp)
	if !ok || TraceParentOf(link.SpanContext) != tp {
		t.Fatalf("round trip: %v %q", ok, TraceParentOf(link.SpanContext))
	}
	for _, bad := range []string{"", "00-zz", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		if _, ok := LinkTo(bad); ok {
			t.Fatalf("%q linked", bad)
		}
	}
}

// TestAttributeValuesBoundedByDefault: 1,024 bytes unless the environment
// names a length.
func TestAttributeValuesBoundedByDefault(t *testing.T) {
	t.Parallel()
	if got := spanLimits(lookupOf(nil)).AttributeValueLengthLimit; got != MaxAttributeBytes {
		t.Fatalf("default: %d", got)
	}
	if got := spanLimits(lookupOf(map[string]string{"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "4096"})).AttributeValueLengthLimit; got == MaxAttributeBytes {
		t.Fatalf("the environment's length is kept: %d", got)
	}
}
