package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// TestTracesFollowACheckout runs the real binary with OTEL_* pointing at a
// real OTLP/HTTP endpoint and follows one reserve → confirm, and one hold
// left to expire, through the spans it exports: HTTP request → GraphQL
// operation → resolver → wait for the coalesced batch (linked to the batch,
// with its size) → the batch with its SQL statements and River insert; the
// expiry job's span linked to the reserve that made the hold; a webhook
// delivery carrying its span's traceparent. Trace context is taken from
// keys only: an anonymous caller's and a checkout token's traceparent
// start no span in their trace. No attribute holds a key, a token or a
// webhook secret.
func TestTracesFollowACheckout(t *testing.T) {
	t.Parallel()
	rec := newOTLPReceiver(t)
	hook := newTraceparentHook(t)
	ts := setupBinary(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": rec.url, "OTEL_SERVICE_NAME": "inventory-e2e", "OTEL_BSP_SCHEDULE_DELAY": "100",
		"INVENTORY_WEBHOOK_ALLOW_PRIVATE": "true",
	})
	ts.seed("TRACE-1", 10)
	var created struct {
		Secret string `json:"secret"`
	}
	ts.mustData(ts.gql(ts.admin, `mutation($u: String!) { createWebhook(input: {url: $u, topics: [STOCK_CHANGED]}) { secret userErrors { code } } }`,
		map[string]any{"u": hook.url}), "createWebhook", &created)

	const (
		reserveTrace = "11111111111111111111111111111111"
		confirmTrace = "22222222222222222222222222222222"
		expireTrace  = "33333333333333333333333333333333"
		anonTrace    = "44444444444444444444444444444444"
		tokenTrace   = "55555555555555555555555555555555"
		streamTrace  = "66666666666666666666666666666666"
		callerSpan   = "00f067aa0ba902b7"
	)
	parent := func(traceID string) string { return "00-" + traceID + "-" + callerSpan + "-01" }
	reserve := `mutation Reserve($key: String!, $ttl: Int!) { reserve(input: {checkoutId: "co-trace", requestKey: $key, ttlSeconds: $ttl,
		lines: [{sku: "TRACE-1", location: "AMS", quantity: 1}]}) { reservation { id } userErrors { code } } }`
	var held struct {
		Reservation struct{ ID string } `json:"reservation"`
	}
	ts.mustData(postTraced(t, ts.url, ts.service, parent(reserveTrace), reserve, map[string]any{"key": "r1", "ttl": 900}), "reserve", &held)
	var confirmed struct {
		UserErrors []any `json:"userErrors"`
	}
	ts.mustData(postTraced(t, ts.url, ts.service, parent(confirmTrace),
		`mutation Confirm($id: ID!) { confirmReservation(input: {id: $id, orderRef: "order-trace"}) { userErrors { code } } }`,
		map[string]any{"id": held.Reservation.ID}), "confirmReservation", &confirmed)
	if len(confirmed.UserErrors) != 0 {
		t.Fatalf("confirm: %+v", confirmed.UserErrors)
	}
	ts.mustData(postTraced(t, ts.url, ts.service, parent(expireTrace), reserve, map[string]any{"key": "r2", "ttl": 1}), "reserve", &held)
	var token struct {
		Token string `json:"token"`
	}
	ts.mustData(ts.gql(ts.service, `mutation { issueCheckoutToken(checkoutId: "co-trace") { token } }`, nil), "issueCheckoutToken", &token)
	var avail []any
	ts.mustData(postTraced(t, ts.url, "", parent(anonTrace), `query AnonRead { availability(skus: ["TRACE-1"]) { available } }`, nil), "availability", &avail)
	var mine []any
	ts.mustData(postTraced(t, ts.url, token.Token, parent(tokenTrace), `query TokenRead { checkoutReservations(checkoutId: "co-trace") { id } }`, nil),
		"checkoutReservations", &mine)

	var many strings.Builder
	many.WriteString("query ManyAliases {")
	for i := range 40 {
		fmt.Fprintf(&many, ` a%d: sku(code: "TRACE-1") { code }`, i)
	}
	many.WriteString(" }")
	if r := postTraced(t, ts.url, "", "", many.String(), nil); len(r.Errors) > 0 {
		t.Fatalf("40 aliases: %+v", r.Errors)
	}
	watchOnce(t, ts.url, ts.service, "", `subscription Watch { availabilityChanged(skus: ["TRACE-1"]) { available } }`)
	watchOnce(t, ts.url, "", "", `subscription Refused { reservationChanged(checkoutId: "co-trace") { id } }`)
	watchOnce(t, ts.url, ts.service, parent(streamTrace), `query StreamRead { availability(skus: ["TRACE-1"]) { available } }`)
	// A stream that gets no message while the test runs: its setup span
	// must reach the collector all the same.
	openStream(t, ts.url, ts.admin, `subscription Idle { stockChanged(skus: ["TRACE-IDLE"]) { seq } }`)

	var st spanSet
	waitUntil(t, 30*time.Second, "the expiry job's span linked to its reserve, a webhook delivery's span and an open subscription's setup span to be exported", func() bool {
		st = newSpanSet(rec.snapshot())
		wait := st.one(expireTrace, "reserve batch wait")
		return wait != nil && st.linking("river.work/reservation_expiry", wait) != nil && len(st.named("webhook deliver")) > 0 &&
			len(st.named("graphql subscription Watch")) > 0 && len(st.named("graphql subscription Idle")) > 0
	})

	// The reserve: the caller's trace, parent by parent.
	httpSpan := st.child(reserveTrace, nil, "POST /graphql")
	if httpSpan == nil || hexID(httpSpan.ParentSpanId) != callerSpan || httpSpan.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Fatalf("the reserve's HTTP span continues a service key's trace: %v\n%s", httpSpan, st)
	}
	op := st.child(reserveTrace, httpSpan, "graphql mutation Reserve")
	field := st.child(reserveTrace, op, "Mutation.reserve")
	wait := st.child(reserveTrace, field, "reserve batch wait")
	if op == nil || field == nil || wait == nil {
		t.Fatalf("HTTP → operation → resolver → batch wait: %v %v %v\n%s", op, field, wait, st)
	}
	if got := stringAttr(op.Attributes, "graphql.operation.name"); got != "Reserve" {
		t.Fatalf("operation name attribute %q", got)
	}
	if len(wait.Links) != 1 || intAttr(wait.Attributes, "inventory.batch.size") < 1 {
		t.Fatalf("the wait links its batch and names its size: %+v", wait)
	}
	batch := st.byID[hexID(wait.Links[0].SpanId)]
	if batch == nil || batch.Name != "reserve batch" || st.linkTo(batch, wait) == nil || intAttr(batch.Attributes, "inventory.batch.size") < 1 {
		t.Fatalf("the batch links back to every request it served: %v\n%s", batch, st)
	}
	// Each statement's span names it (db.query.text), never its arguments.
	sql := st.descendants(batch, func(s *tracepb.Span) bool { return stringAttr(s.Attributes, "db.query.text") != "" })
	if len(sql) < 4 {
		t.Fatalf("the batch's SQL statements are under it: %d\n%s", len(sql), st)
	}
	for _, s := range sql {
		if stringAttr(s.Attributes, "db.system.name") != "postgresql" || intAttr(s.Attributes, "db.query.parameter.0") != -1 ||
			stringAttr(s.Attributes, "db.query.parameter.0") != "" {
			t.Fatalf("a SQL span: %+v", s)
		}
	}
	if len(st.children(batch, func(s *tracepb.Span) bool { return s.Name == "river.insert_many" })) != 1 {
		t.Fatalf("the batch inserts the hold's expiry job under a span of River's\n%s", st)
	}

	t.Logf("the reserve's trace:\n%s\nthe expiry's:\n%s", st.tree(reserveTrace), st.tree(hexID(st.linking("river.work/reservation_expiry", st.one(expireTrace, "reserve batch wait")).TraceId)))

	// The confirm, in its own caller trace.
	cop := st.child(confirmTrace, st.child(confirmTrace, nil, "POST /graphql"), "graphql mutation Confirm")
	if cop == nil || st.child(confirmTrace, cop, "Mutation.confirmReservation") == nil {
		t.Fatalf("the confirm's spans\n%s", st)
	}

	// The expiry job links back to the reserve that made its hold.
	expiry := st.linking("river.work/reservation_expiry", st.one(expireTrace, "reserve batch wait"))
	if expiry.TraceId == nil || hexID(expiry.TraceId) == expireTrace {
		t.Fatalf("the expiry job runs in a trace of its own, linked: %+v", expiry)
	}

	// A webhook delivery sends its span's trace context.
	deliveries := st.named("webhook deliver")
	sent := hook.traceparents()
	if len(sent) == 0 || !st.hasTraceparent(deliveries, sent[0]) {
		t.Fatalf("a delivery's traceparent %v names its exported span\n%s", sent, st)
	}

	// A subscription's setup is a span of its own, ended once its stream
	// is set up (Idle's stream is still open, with no message), with no
	// HTTP span around the stream; a refused one says so.
	for _, name := range []string{"graphql subscription Watch", "graphql subscription Idle"} {
		if sub := st.named(name); len(sub) != 1 || st.byID[hexID(sub[0].ParentSpanId)] != nil || sub[0].Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
			t.Fatalf("%s: the subscription's setup span, a root: %v\n%s", name, sub, st)
		}
	}
	if sub := st.named("graphql subscription Refused"); len(sub) != 1 || sub[0].Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Fatalf("a refused subscription's setup span has an error status\n%s", st)
	}
	// A key's operation on an event stream continues the caller's trace.
	if sse := st.one(streamTrace, "graphql query StreamRead"); sse == nil || hexID(sse.ParentSpanId) != callerSpan {
		t.Fatalf("a service key's query over SSE, in its caller's trace: %v\n%s", sse, st)
	}

	// An operation spans at most 16 of its root fields, however many
	// aliases it has.
	if ops := st.named("graphql query ManyAliases"); len(ops) != 1 ||
		len(st.children(ops[0], func(s *tracepb.Span) bool { return s.Name == "Query.sku" })) != 16 {
		t.Fatalf("40 aliases of sku: %d operations\n%s", len(ops), st)
	}

	// Only keys continue a caller's trace.
	for _, id := range []string{anonTrace, tokenTrace} {
		if n := len(st.inTrace(id)); n != 0 {
			t.Fatalf("a caller without a key put %d spans in its own trace %s", n, id)
		}
	}
	for _, name := range []string{"graphql query AnonRead", "graphql query TokenRead"} {
		if len(st.named(name)) != 1 {
			t.Fatalf("%s is traced once, in a trace of ours\n%s", name, st)
		}
	}

	// The trace the operations docs show is made of spans the server sends.
	doc, err := os.ReadFile(repo("docs/operations/tracing.md"))
	if err != nil {
		t.Fatal(err)
	}
	shown := 0
	for _, block := range strings.Split(string(doc), "```trace\n")[1:] {
		for line := range strings.Lines(strings.Split(block, "```")[0]) {
			name := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), 2)[0]
			if shown++; len(st.named(name)) == 0 {
				t.Fatalf("docs/operations/tracing.md shows a span %q the server does not send", name)
			}
		}
	}
	if shown < 10 {
		t.Fatalf("docs/operations/tracing.md shows %d spans", shown)
	}

	// Nothing secret in any attribute.
	if rec.resourceAttr("service.name") != "inventory-e2e" {
		t.Fatalf("service.name from OTEL_SERVICE_NAME: %q", rec.resourceAttr("service.name"))
	}
	for _, secret := range []string{ts.admin, ts.service, token.Token, created.Secret, "Bearer"} {
		if where := st.attributeContaining(secret); where != "" {
			t.Fatalf("an attribute holds a secret: %s", where)
		}
	}
}

// watchOnce sends an operation over SSE (with a traceparent, unless it is
// empty) and closes the stream after its first message.
func watchOnce(t *testing.T, url, token, traceparent, query string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	resp := postStream(t, ctx, url, token, traceparent, query)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data:") {
			return
		}
	}
	t.Fatalf("no message on the subscription: %v", sc.Err())
}

// openStream sends a subscription over SSE and leaves its stream open,
// unread, until the test ends.
func openStream(t *testing.T, url, token, query string) {
	t.Helper()
	resp := postStream(t, t.Context(), url, token, "", query)
	t.Cleanup(func() { resp.Body.Close() })
}

// postStream POSTs one operation asking for an event stream.
func postStream(t *testing.T, ctx context.Context, url, token, traceparent, query string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/graphql", bytes.NewReader(mustJSON(map[string]any{"query": query})))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("%s: status %d", query, resp.StatusCode)
	}
	return resp
}

// postTraced POSTs one operation with a traceparent header.
func postTraced(t *testing.T, url, token, traceparent, query string, vars map[string]any) gqlResponse {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, err := http.NewRequest(http.MethodPost, url+"/graphql", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r gqlResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return r
}

// traceparentHook is a webhook receiver that answers 200 and keeps the
// traceparent of each delivery.
type traceparentHook struct {
	url  string
	mu   sync.Mutex
	seen []string
}

func newTraceparentHook(t *testing.T) *traceparentHook {
	h := &traceparentHook{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.seen = append(h.seen, r.Header.Get("traceparent"))
		h.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL + "/hook"
	return h
}

func (h *traceparentHook) traceparents() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}
