package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// metricValue reads one unlabelled sample from a /metrics body (-1 when
// absent).
func metricValue(body, name string) float64 {
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// waitMetric polls /metrics until name reaches want.
func (ts *testServer) waitMetric(name string, want float64) string {
	ts.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := httpGetAs(ts.t, ts.url+"/metrics", ts.admin)
		if metricValue(body, name) == want || time.Now().After(deadline) {
			if got := metricValue(body, name); got != want {
				ts.t.Fatalf("%s = %v, want %v", name, got, want)
			}
			return body
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sseNext reads the payloads of n "event: next" messages from an SSE body.
func sseNext(t *testing.T, sc *bufio.Scanner, n int) [][]byte {
	t.Helper()
	var out [][]byte
	event := ""
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "next":
			out = append(out, []byte(strings.TrimPrefix(line, "data: ")))
		}
	}
	if len(out) < n {
		t.Fatalf("SSE: %d of %d messages (%v)", len(out), n, sc.Err())
	}
	return out
}

// TestGroupFanoutDeliversWhatEachWouldAlone: subscribers of the same
// stockChanged operation over graphql-transport-ws, graphql-ws and SSE,
// plus one that never reads, each receive byte for byte the payloads a
// subscriber running alone receives (the reference resumes from a cursor,
// which runs it alone through gqlgen's own path), in order and promptly
// although one member reads nothing; and gqlgen executed each event twice
// (once for the group, once for the reference), not once per subscriber.
func TestGroupFanoutDeliversWhatEachWouldAlone(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 5)
	var seen []wsEvent
	for deadline := time.Now().Add(10 * time.Second); len(seen) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ts.mustData(ts.gql(ts.admin, `{ stockEvents(after: 0, first: 100) { seq } }`, nil), "stockEvents", &seen)
	}
	if len(seen) == 0 {
		t.Fatal("the seed's event was not published")
	}
	seq0 := seen[len(seen)-1].Seq

	ref := dialWS(t, ts.url, ts.admin, false)
	ref.ack()
	ref.subscribe("ref", stockChangedSub, map[string]any{"after": seq0})

	const nWS, nLegacy, nSSE = 5, 3, 3
	var members []*wsClient
	for i := range nWS + nLegacy {
		c := dialWS(t, ts.url, ts.admin, i >= nWS)
		c.ack()
		c.subscribe(fmt.Sprint("m", i), stockChangedSub, map[string]any{"after": nil})
		members = append(members, c)
	}
	slow := dialWS(t, ts.url, ts.admin, false) // subscribes, then reads nothing
	slow.ack()
	slow.subscribe("slow", stockChangedSub, map[string]any{"after": nil})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var sse []*bufio.Scanner
	for range nSSE {
		resp := openSSE(t, ctx, ts.url, ts.admin, stockChangedSub, map[string]any{"after": nil})
		sse = append(sse, bufio.NewScanner(resp.Body))
	}
	group := nWS + nLegacy + 1 + nSSE
	before := ts.waitMetric("inventory_subscribers", float64(group+1))
	execs0 := metricValue(before, "inventory_subscription_executions_total")

	const events = 15
	start := time.Now()
	for i := range events {
		ts.mustData(ts.gql(ts.admin, `mutation($r: String!) { receiveStock(input: {sku: "HP", location: "AMS", quantity: 1, reference: $r}) { userErrors { code } } }`,
			map[string]any{"r": fmt.Sprint("PO-", i)}), "receiveStock", new(map[string]any))
	}

	// The reference: what one subscriber alone is sent.
	var want [][]byte
	var wantEvents []wsEvent
	for range events {
		m, err := ref.next(10 * time.Second)
		if err != nil || m.Type != "next" {
			t.Fatalf("reference: %+v %v", m, err)
		}
		want = append(want, m.Payload)
		var p struct {
			Data struct{ StockChanged wsEvent }
		}
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			t.Fatal(err)
		}
		wantEvents = append(wantEvents, p.Data.StockChanged)
	}
	requireDense(t, wantEvents, seq0+1)

	for i, c := range members {
		for j := range events {
			m, err := c.next(10 * time.Second)
			wantType := "next"
			if i >= nWS {
				wantType = "data"
			}
			if err != nil || m.Type != wantType || m.ID != fmt.Sprint("m", i) {
				t.Fatalf("member %d message %d: %+v %v", i, j, m, err)
			}
			if !bytes.Equal(m.Payload, want[j]) {
				t.Fatalf("member %d message %d:\n%s\nwant (alone)\n%s", i, j, m.Payload, want[j])
			}
		}
	}
	for i, sc := range sse {
		for j, got := range sseNext(t, sc, events) {
			if !bytes.Equal(got, want[j]) {
				t.Fatalf("SSE member %d message %d:\n%s\nwant (alone)\n%s", i, j, got, want[j])
			}
		}
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("members took %s with one of them not reading", took)
	}

	// Once for the group, once for the reference.
	_, body := httpGetAs(t, ts.url+"/metrics", ts.admin)
	if got := metricValue(body, "inventory_subscription_executions_total") - execs0; got != 2*events {
		t.Fatalf("executions for %d events and %d subscribers: %v, want %d (once per group)", events, group+1, got, 2*events)
	}
	if got := metricValue(body, "inventory_subscription_groups"); got != 1 {
		t.Fatalf("groups: %v, want 1", got)
	}
}
