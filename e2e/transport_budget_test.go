package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// wsAnswers sends nothing; it reads frames until every operation in ids has
// had its first answer, and returns each one's error code ("" for data; the
// protocol's "error" frames count too). It fails the test after timeout.
func (c *wsClient) wsAnswers(ids []string, timeout time.Duration) map[string]string {
	c.t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	got := map[string]string{}
	deadline := time.Now().Add(timeout)
	for len(got) < len(want) {
		m, err := c.next(time.Until(deadline))
		if err != nil {
			c.t.Fatalf("%d of %d operations answered: %v", len(got), len(want), err)
		}
		if _, seen := got[m.ID]; seen || !want[m.ID] || m.Type == "complete" {
			continue
		}
		type gqlErr struct {
			Message    string
			Extensions map[string]any
		}
		var errs []gqlErr
		switch m.Type {
		case "next", "data":
			var p struct{ Errors []gqlErr }
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				c.t.Fatalf("payload %s: %v", m.Payload, err)
			}
			errs = p.Errors
		case "error":
			if err := json.Unmarshal(m.Payload, &errs); err != nil || len(errs) == 0 {
				errs = []gqlErr{{Message: string(m.Payload), Extensions: map[string]any{"code": "PROTOCOL"}}}
			}
		default:
			continue
		}
		got[m.ID] = ""
		if len(errs) > 0 {
			got[m.ID] = fmt.Sprint(errs[0].Extensions["code"])
		}
	}
	return got
}

// tally counts answers by code.
func tally(answers map[string]string) map[string]int {
	n := map[string]int{}
	for _, code := range answers {
		n[code]++
	}
	return n
}

// TestSocketSpendsTheCallersBudget: a checkout token that sends 300
// mutations at once over one WebSocket gets at most its write budget
// executed (counted in reservations), the rest RATE_LIMITED, and its HTTP
// requests then find the same budget spent; its queries over the socket
// spend its read budget. A mutation over SSE spends it too.
func TestSocketSpendsTheCallersBudget(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{
		"INVENTORY_RATE_LIMIT_CHECKOUT_WRITES": "20",
		"INVENTORY_RATE_LIMIT_CHECKOUT_READS":  "30",
		"INVENTORY_RATE_LIMIT_WINDOW":          "10m",
		"INVENTORY_WS_MAX_IN_FLIGHT":           "1000", // this test is about the budget alone
		"INVENTORY_CHECKOUT_MAX_LIVE_HOLDS":    "1000",
		"INVENTORY_CHECKOUT_MAX_UNITS_PER_SKU": "1000",
	})
	ts.seed("TEE", 1000)
	tok := ts.checkoutToken("cart-ws")
	w := dialWS(t, ts.url, tok, false)
	w.ack()
	ids := make([]string, 300)
	start := time.Now()
	for i := range ids {
		ids[i] = fmt.Sprint("m", i)
		w.send(wsMessage{ID: ids[i], Type: "subscribe", Payload: mustJSON(map[string]any{
			"query": reserveMutation, "variables": reserveVars("cart-ws", fmt.Sprint("k", i), "TEE", 1)})})
	}
	n := tally(w.wsAnswers(ids, 30*time.Second))
	t.Logf("300 mutations over one socket: %v in %v", n, time.Since(start).Round(time.Millisecond))
	if held := ts.count(`SELECT count(*) FROM reservations WHERE checkout_id = 'cart-ws'`); held > 20 || n[""] != held || n["RATE_LIMITED"] != 300-held {
		t.Fatalf("300 mutations over a socket with a write budget of 20: %d reservations, answers %v", held, n)
	}
	// The same budget over HTTP: spent.
	if status, _, code := rateProbe(t, ts.url, tok, "", `mutation { reserve(input: {checkoutId: "cart-ws", requestKey: "http", lines: [{sku: "TEE", location: "AMS", quantity: 1}]}) { userErrors { code } } }`); status != http.StatusTooManyRequests || code != "RATE_LIMITED" {
		t.Fatalf("an HTTP mutation after the socket spent the writes: %d %s", status, code)
	}
	// And over SSE.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if resp := openSSE(t, ctx, ts.url, tok, reserveMutation, reserveVars("cart-ws", "sse", "TEE", 1)); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("an SSE mutation after the socket spent the writes: %d", resp.StatusCode)
	}

	// Reads: 40 queries over a socket get the 30 of the read budget (the
	// upgrade itself carried no token: it spent the address's anonymous
	// budget, not the checkout's).
	r := dialWS(t, ts.url, tok, false)
	r.ack()
	qids := make([]string, 40)
	for i := range qids {
		qids[i] = fmt.Sprint("q", i)
		r.send(wsMessage{ID: qids[i], Type: "subscribe", Payload: mustJSON(map[string]any{"query": `{ availability(skus: ["TEE"]) { available } }`})})
	}
	q := tally(r.wsAnswers(qids, 30*time.Second))
	if q[""] != 30 || q["RATE_LIMITED"] != 10 {
		t.Fatalf("40 queries over a socket with a read budget of 30: %v", q)
	}
	if status, _, code := rateProbe(t, ts.url, tok, "", probeRead); status != http.StatusTooManyRequests || code != "RATE_LIMITED" {
		t.Fatalf("an HTTP query after sockets spent the reads: %d %s", status, code)
	}

	// A checkout with a budget of its own over SSE: mutations spend it.
	tok2 := ts.checkoutToken("cart-sse")
	statuses := map[int]int{}
	for i := range 25 {
		resp := openSSE(t, ctx, ts.url, tok2, reserveMutation, reserveVars("cart-sse", fmt.Sprint("s", i), "TEE", 1))
		statuses[resp.StatusCode]++
		if body := readSSE(t, resp); resp.StatusCode == http.StatusOK && !strings.Contains(body, `"reservation":{`) {
			t.Fatalf("SSE mutation %d: %.300q", i, body)
		}
	}
	if held := ts.count(`SELECT count(*) FROM reservations WHERE checkout_id = 'cart-sse'`); held != 20 || statuses[http.StatusTooManyRequests] != 5 {
		t.Fatalf("25 SSE mutations with a write budget of 20: %d reservations, statuses %v", held, statuses)
	}
}

// TestSocketBoundsInFlightAndTimesOut: a socket may have
// INVENTORY_WS_MAX_IN_FLIGHT queries and mutations in flight; one more is
// answered RATE_LIMITED at once and the socket stays open. A mutation over a
// socket or SSE waiting on a lock gives up after INVENTORY_REQUEST_TIMEOUT as
// it would over HTTP, and changes nothing.
func TestSocketBoundsInFlightAndTimesOut(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_WS_MAX_IN_FLIGHT": "4", "INVENTORY_REQUEST_TIMEOUT": "2s"})
	ts.seed("HP", 5)
	tx, err := ts.db.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(t.Context(), `SELECT FROM balances FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	w := dialWS(t, ts.url, ts.admin, false)
	w.ack()
	ids := make([]string, 10)
	start := time.Now()
	for i := range ids {
		ids[i] = fmt.Sprint("r", i)
		w.send(wsMessage{ID: ids[i], Type: "subscribe", Payload: mustJSON(map[string]any{
			"query": fmt.Sprintf(`mutation { receiveStock(input: {sku: "HP", location: "AMS", quantity: 1, reference: "PO-%d"}) { balance { onHand } } }`, i)})})
	}
	// Nothing here releases the lock: every answer must come from the
	// limits, within the request timeout and a margin.
	n := tally(w.wsAnswers(ids, 8*time.Second))
	took := time.Since(start)
	t.Logf("10 blocked mutations on one socket with 4 in flight: %v in %v", n, took.Round(time.Millisecond))
	if n["RATE_LIMITED"] != 6 || n["INTERNAL"] != 4 || took > 6*time.Second {
		t.Fatalf("10 mutations waiting on a lock, 4 in flight, request timeout 2s: %v after %v", n, took)
	}
	// The socket is still usable.
	w.send(wsMessage{ID: "after", Type: "subscribe", Payload: mustJSON(map[string]any{"query": `{ locations { code } }`})})
	if a := w.wsAnswers([]string{"after"}, 5*time.Second); a["after"] != "" {
		t.Fatalf("a query after the refusals: %v", a)
	}
	// SSE: the mutation gets the request timeout too.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	start = time.Now()
	resp := openSSE(t, ctx, ts.url, ts.admin, `mutation { receiveStock(input: {sku: "HP", location: "AMS", quantity: 1, reference: "PO-sse"}) { balance { onHand } } }`, nil)
	body := readSSE(t, resp)
	if took := time.Since(start); !strings.Contains(body, "INTERNAL") || took > 6*time.Second {
		t.Fatalf("SSE mutation waiting on a lock after %v: %.300q", took, body)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if onHand := ts.count(`SELECT on_hand FROM balances`); onHand != 5 {
		t.Fatalf("on hand %d after abandoned receives, want 5", onHand)
	}
}

// readSSE reads an SSE response to its end.
func readSSE(t *testing.T, resp *http.Response) string {
	t.Helper()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return b.String()
}

// TestSocketBudgetBeforeParsing: once a caller's budget is spent, what it
// sends over a socket is refused before gqlgen parses it (a document that
// does not even parse is RATE_LIMITED, not GRAPHQL_PARSE_FAILED), so a spent
// budget cannot buy parsing work, as over HTTP.
func TestSocketBudgetBeforeParsing(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{
		"INVENTORY_RATE_LIMIT_CHECKOUT_READS": "3",
		"INVENTORY_RATE_LIMIT_WINDOW":         "10m",
	})
	tok := ts.checkoutToken("cart-parse")
	w := dialWS(t, ts.url, tok, false)
	w.ack()
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		w.send(wsMessage{ID: id, Type: "subscribe", Payload: mustJSON(map[string]any{"query": `{ locations { code } }`})})
	}
	if n := tally(w.wsAnswers(ids, 10*time.Second)); n[""] != 3 {
		t.Fatalf("3 queries within a read budget of 3: %v", n)
	}
	w.send(wsMessage{ID: "bad", Type: "subscribe", Payload: mustJSON(map[string]any{"query": `{ locations { code ` + strings.Repeat("(", 1000)})})
	if a := w.wsAnswers([]string{"bad"}, 10*time.Second); a["bad"] != "RATE_LIMITED" {
		t.Fatalf("an unparsable document after the budget was spent: %q, want RATE_LIMITED before parsing", a["bad"])
	}
}
