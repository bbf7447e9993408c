package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// TestTracesBoundWhatCallersSend is the attacks on tracing, against the
// real binary and a real OTLP endpoint, each of which an anonymous caller
// could make cost far more than it sent:
//   - a 100 KB User-Agent was a 100 KB attribute (1 MB headers: 3.7 GB of
//     server memory in the export queue, and every export over the
//     collector's limit lost its legitimate spans with it): every attribute
//     is now at most 1,024 bytes;
//   - X-Forwarded-For from an untrusted peer named the span's client: the
//     span names the address our rate limits use;
//   - 200 aliases of sku(code:) were 800 SQL spans: an operation spans at
//     most 64 statements and says how many it left out;
//   - a key's 16 KB tracestate was copied onto every span of its trace
//     (1,500 reserves: 379 MB exported in 6 s): the server carries the 512
//     characters W3C asks for, its long members dropped first.
func TestTracesBoundWhatCallersSend(t *testing.T) {
	t.Parallel()
	rec := newOTLPReceiver(t)
	ts := setupBinary(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rec.url, "OTEL_BSP_SCHEDULE_DELAY": "100"})
	ts.seed("BOUND-1", 1)

	query := func(q string) []byte { b, _ := json.Marshal(map[string]any{"query": q}); return b }
	if a := postFrom(t, ts.url, query(`query BigHeaders { availability(skus: ["BOUND-1"]) { available } }`),
		"User-Agent", strings.Repeat("u", 100_000), "X-Forwarded-For", "198.51.100.7"); a.status != http.StatusOK {
		t.Fatalf("big headers: HTTP %d", a.status)
	}
	const stateTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	var members []string
	for i := range 30 { // the SDK parses up to 32 members of 256+256 characters
		members = append(members, fmt.Sprintf("k%02d%s=%s", i, strings.Repeat("a", 253), strings.Repeat("v", 256)))
	}
	if a := postFrom(t, ts.url, query(`query KeyState { availability(skus: ["BOUND-1"]) { available } }`),
		"Authorization", "Bearer "+ts.service, "traceparent", "00-"+stateTrace+"-00f067aa0ba902b7-01",
		"tracestate", "ours=keep,"+strings.Join(members, ",")+",last=kept"); a.status != http.StatusOK {
		t.Fatalf("a key's 16 KB tracestate: HTTP %d", a.status)
	}

	var many strings.Builder
	many.WriteString("query ManySkus {")
	for i := range 200 {
		fmt.Fprintf(&many, ` a%d: sku(code: "NOPE-%d") { code }`, i, i)
	}
	many.WriteString(" }")
	if r := postTraced(t, ts.url, "", "", many.String(), nil); len(r.Errors) > 0 {
		t.Fatalf("200 aliases: %+v", r.Errors)
	}

	var st spanSet
	waitUntil(t, 20*time.Second, "both operations' spans", func() bool {
		st = newSpanSet(rec.snapshot())
		return len(st.named("graphql query BigHeaders")) == 1 && len(st.named("graphql query ManySkus")) == 1 &&
			len(st.named("graphql query KeyState")) == 1
	})
	for _, sp := range st.all {
		for _, kv := range sp.Attributes {
			if n := len(kv.GetValue().GetStringValue()); n > 1024 {
				t.Fatalf("%s: attribute %s of %d bytes", sp.Name, kv.Key, n)
			}
		}
	}
	keyState := st.named("graphql query KeyState")[0]
	if hexID(keyState.TraceId) != stateTrace || keyState.TraceState != "ours=keep,last=kept" {
		t.Fatalf("a key's 16 KB tracestate: the operation, in trace %s, carries %d characters; want %q in trace %s",
			hexID(keyState.TraceId), len(keyState.TraceState), "ours=keep,last=kept", stateTrace)
	}
	for _, sp := range st.inTrace(stateTrace) {
		if len(sp.TraceState) > 512 {
			t.Fatalf("%s carries a tracestate of %d characters", sp.Name, len(sp.TraceState))
		}
	}
	op := st.named("graphql query BigHeaders")[0]
	httpSpan := st.byID[hexID(op.ParentSpanId)]
	if httpSpan == nil || stringAttr(httpSpan.Attributes, "client.address") != "127.0.0.1" ||
		len(stringAttr(httpSpan.Attributes, "user_agent.original")) != 1024 {
		t.Fatalf("the HTTP span names the client we rate-limit and a cut User-Agent: %+v", httpSpan)
	}
	manyOp := st.named("graphql query ManySkus")[0]
	sql := st.descendants(manyOp, func(s *tracepb.Span) bool { return stringAttr(s.Attributes, "db.system.name") == "postgresql" })
	if len(sql) == 0 || len(sql) > 64 || intAttr(manyOp.Attributes, "inventory.sql_spans_dropped") < 200 {
		t.Fatalf("200 aliases: %d SQL spans, %d left out; want at most 64, the rest counted",
			len(sql), intAttr(manyOp.Attributes, "inventory.sql_spans_dropped"))
	}
	t.Logf("200 aliases of sku: %d SQL spans, %d statements untraced", len(sql), intAttr(manyOp.Attributes, "inventory.sql_spans_dropped"))
}
