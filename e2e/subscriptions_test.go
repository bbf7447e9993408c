package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// receiveEvents reads n stockChanged events and checks they are in order.
func receiveEvents(t *testing.T, c *wsClient, n int) []wsEvent {
	t.Helper()
	got := make([]wsEvent, 0, n)
	for range n {
		var e wsEvent
		c.data("stockChanged", &e, 10*time.Second)
		got = append(got, e)
	}
	return got
}

// requireDense fails unless seqs are exactly from, from+1, …
func requireDense(t *testing.T, events []wsEvent, from int64) {
	t.Helper()
	for i, e := range events {
		if e.Seq != from+int64(i) {
			t.Fatalf("event %d has seq %d, want %d (gap, duplicate or reorder)", i, e.Seq, from+int64(i))
		}
	}
}

// TestStockChangedAcrossInstances: a subscriber on instance A receives, in
// order and without gaps, the events caused by mutations sent to instance B.
func TestStockChangedAcrossInstances(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	b, _ := ts.startInstance()
	ts.seed("HP", 10) // events 1..2 (receive... createSku writes none): one RECEIVED

	sub := dialWS(t, ts.url, ts.admin, false)
	sub.ack()
	sub.subscribe("1", stockChangedSub, map[string]any{"after": 0})
	first := receiveEvents(t, sub, 1)
	if first[0].Cause != "RECEIVED" || first[0].OnHand != 10 {
		t.Fatalf("replayed event: %+v", first[0])
	}

	// Mutations on B: reserve twice, release one, adjust.
	var ids []string
	for i := range 2 {
		r, err := gqlTo(b, ts.service, reserveMutation, reserveVars(fmt.Sprintf("cart-%d", i), "k", "HP", 2))
		if err != nil {
			t.Fatal(err)
		}
		p, err := decodeReserve(r)
		if err != nil || p.Reservation == nil {
			t.Fatalf("reserve on B: %+v %v", p, err)
		}
		ids = append(ids, p.Reservation.ID)
	}
	if _, err := gqlTo(b, ts.service, `mutation($id: ID!) { releaseReservation(input: {id: $id}) { userErrors { code } } }`, map[string]any{"id": ids[0]}); err != nil {
		t.Fatal(err)
	}
	if _, err := gqlTo(b, ts.admin, `mutation { adjustStock(input: {sku: "HP", location: "AMS", delta: -1, reason: "damaged", reference: "x"}) { userErrors { code } } }`, nil); err != nil {
		t.Fatal(err)
	}
	got := receiveEvents(t, sub, 4)
	requireDense(t, append(first, got...), 1)
	want := []struct {
		cause            string
		onHand, reserved int
	}{{"RESERVED", 10, 2}, {"RESERVED", 10, 4}, {"RELEASED", 10, 2}, {"ADJUSTED", 9, 2}}
	for i, w := range want {
		if got[i].Cause != w.cause || got[i].OnHand != w.onHand || got[i].Reserved != w.reserved || got[i].Available != w.onHand-w.reserved {
			t.Fatalf("event %d: %+v, want %+v", i, got[i], w)
		}
	}
	if _, body := httpGetAs(t, ts.url+"/metrics", ts.admin); !strings.Contains(body, "inventory_subscribers 1\n") {
		t.Fatal("/metrics on A does not count its live subscriber")
	}
	// The polling query agrees with the stream.
	var polled []wsEvent
	ts.mustData(ts.gql(ts.admin, `{ stockEvents(after: 0, first: 10) { seq sku location cause onHand reserved available } }`, nil), "stockEvents", &polled)
	if len(polled) != 5 || polled[4] != got[3] {
		t.Fatalf("stockEvents: %+v", polled)
	}
}

// TestStockChangedResume: a subscriber that disconnects and comes back with
// after = the last seq it saw gets exactly what it missed, then live events.
func TestStockChangedResume(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 10)
	ts.seed("CABLE", 10)

	sub := dialWS(t, ts.url, ts.admin, false)
	sub.ack()
	sub.subscribe("1", stockChangedSub, map[string]any{"after": 0})
	seen := receiveEvents(t, sub, 2)
	_ = sub.conn.Close(websocket.StatusNormalClosure, "bye")

	for i := range 5 {
		ts.gql(ts.admin, fmt.Sprintf(`mutation { receiveStock(input: {sku: "HP", location: "AMS", quantity: %d, reference: "r%d"}) { userErrors { code } } }`, i+1, i), nil)
	}
	again := dialWS(t, ts.url, ts.admin, true) // the legacy protocol works the same
	again.ack()
	again.subscribe("1", stockChangedSub, map[string]any{"after": seen[1].Seq})
	missed := receiveEvents(t, again, 5)
	requireDense(t, missed, seen[1].Seq+1)
	if missed[4].OnHand != 10+1+2+3+4+5 {
		t.Fatalf("last missed event: %+v", missed[4])
	}
	ts.gql(ts.admin, `mutation { receiveStock(input: {sku: "CABLE", location: "AMS", quantity: 1, reference: "r"}) { userErrors { code } } }`, nil)
	live := receiveEvents(t, again, 1)
	requireDense(t, live, missed[4].Seq+1)

	// Filters apply before sending; the cursor still counts every event.
	filtered := dialWS(t, ts.url, ts.admin, false)
	filtered.ack()
	filtered.subscribe("1", stockChangedSub, map[string]any{"after": 0, "skus": []string{"CABLE"}})
	cable := receiveEvents(t, filtered, 2)
	if cable[0].SKU != "CABLE" || cable[1].SKU != "CABLE" || cable[1].Seq != live[0].Seq {
		t.Fatalf("filtered: %+v", cable)
	}

	// A cursor older than what is kept is refused with a reason to resync.
	if _, err := ts.db.Exec(t.Context(), `UPDATE stock_events_pruned SET through_seq = 2`); err != nil {
		t.Fatal(err)
	}
	r := ts.gql(ts.admin, `{ stockEvents(after: 1) { seq } }`, nil)
	if r.errorCode() != "BAD_REQUEST" || r.Errors[0].Extensions["reason"] != "CURSOR_EXPIRED" || !strings.Contains(r.Errors[0].Message, "resync from availability") {
		t.Fatalf("expired cursor: %+v", r)
	}
	var kept []wsEvent
	ts.mustData(ts.gql(ts.admin, `{ stockEvents(after: 2, first: 1) { seq } }`, nil), "stockEvents", &kept)
	if len(kept) != 1 || kept[0].Seq != 3 {
		t.Fatalf("cursor at the retention edge: %+v", kept)
	}
}

// TestSubscriptionAuth: sockets with a token that does not authenticate
// close with 4401 at connection_init; one without a token is anonymous (it
// may watch availabilityChanged) and closes with 4401 when it asks for stock
// events; a checkout token asking for stock events or another checkout's
// reservations closes with 4403 — never 1000, which clients take as
// "reconnect".
func TestSubscriptionAuth(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	var tok struct{ Token string }
	ts.mustData(ts.gql(ts.service, `mutation { issueCheckoutToken(checkoutId: "cart-A") { token } }`, nil), "issueCheckoutToken", &tok)

	for name, token := range map[string]string{"bad key": "inv_nope", "garbage": "x.y.z"} {
		c := dialWS(t, ts.url, token, false)
		if code, reason := c.closeCode(5 * time.Second); code != 4401 {
			t.Fatalf("%s: closed with %d %q, want 4401", name, code, reason)
		}
	}
	c := dialWS(t, ts.url, "", false)
	c.ack()
	c.subscribe("1", stockChangedSub, nil)
	if code, reason := c.closeCode(5 * time.Second); code != 4401 {
		t.Fatalf("no token on stockChanged: closed with %d %q, want 4401", code, reason)
	}
	c = dialWS(t, ts.url, tok.Token, false)
	c.ack()
	c.subscribe("1", stockChangedSub, nil)
	if code, reason := c.closeCode(5 * time.Second); code != 4403 {
		t.Fatalf("checkout on stockChanged: %d %q, want 4403", code, reason)
	}
	c = dialWS(t, ts.url, tok.Token, true)
	c.ack()
	c.subscribe("1", `subscription { reservationChanged(checkoutId: "cart-B") { id status } }`, nil)
	if code, reason := c.closeCode(5 * time.Second); code != 4403 {
		t.Fatalf("checkout on another checkout's reservationChanged: %d %q, want 4403", code, reason)
	}
}

// TestHoldExpiryIsPushed: a checkout subscribed to its reservations hears its
// hold being made and, after the deadline, expiring — pushed by the real
// expiry job through the event stream.
func TestHoldExpiryIsPushed(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 3)
	var tok struct{ Token string }
	ts.mustData(ts.gql(ts.service, `mutation { issueCheckoutToken(checkoutId: "cart-A") { token } }`, nil), "issueCheckoutToken", &tok)

	c := dialWS(t, ts.url, tok.Token, false)
	c.ack()
	c.subscribe("1", `subscription { reservationChanged(checkoutId: "cart-A") { id status lines { sku quantity } } }`, nil)
	time.Sleep(200 * time.Millisecond) // the subscription starts from now
	vars := reserveVars("cart-A", "k", "HP", 2)
	vars["in"].(map[string]any)["ttlSeconds"] = 2
	p, err := decodeReserve(ts.gql(tok.Token, reserveMutation, vars))
	if err != nil || p.Reservation == nil {
		t.Fatalf("reserve: %+v %v", p, err)
	}
	type resView struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	var held, expired resView
	c.data("reservationChanged", &held, 5*time.Second)
	if held.ID != p.Reservation.ID || held.Status != "HELD" {
		t.Fatalf("first push: %+v", held)
	}
	start := time.Now()
	c.data("reservationChanged", &expired, 15*time.Second)
	if expired.ID != p.Reservation.ID || expired.Status != "EXPIRED" {
		t.Fatalf("second push: %+v", expired)
	}
	t.Logf("EXPIRED pushed %s after HELD (TTL 2s)", time.Since(start).Round(10*time.Millisecond))
	if n := ts.count(`SELECT reserved FROM balances`); n != 0 {
		t.Fatalf("reserved %d after expiry", n)
	}
}

// TestStockChangedUnderConcurrentWriters: 8 writers make a thousand changes
// while a subscriber reads: it sees seq 1..N exactly, and the last event per
// balance equals the balance in the table.
func TestStockChangedUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	for _, sku := range []string{"A", "B", "C", "D"} {
		ts.seed(sku, 1000)
	}
	sub := dialWS(t, ts.url, ts.admin, false)
	sub.ack()
	sub.subscribe("1", stockChangedSub, map[string]any{"after": 0})
	total := 4 + 8*125
	// The subscriber reads while the writers write, as a live client does:
	// one that takes no bytes for two keep-alive intervals is dropped
	// (TestPeerThatNeverReadsIsDropped), which a race-built run of the
	// writers alone can outlast.
	received := make(chan []wsEvent, 1)
	go func() {
		defer close(received) // also when receiveEvents failed the test
		received <- receiveEvents(t, sub, total)
	}()

	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 125 {
				sku := []string{"A", "B", "C", "D"}[(w+i)%4]
				delta := 1
				if i%2 == 1 {
					delta = -1
				}
				if _, err := gqlTo(ts.url, ts.admin, fmt.Sprintf(`mutation { adjustStock(input: {sku: %q, location: "AMS", delta: %d, reason: "cycle_count", reference: "w%d-%d"}) { userErrors { code } } }`, sku, delta, w, i), nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, ok := <-received
	if !ok {
		t.FailNow() // receiveEvents said why
	}
	requireDense(t, got, 1)
	last := map[string]wsEvent{}
	for _, e := range got {
		last[e.SKU] = e
	}
	for sku, e := range last {
		var onHand, reserved int
		if err := ts.db.QueryRow(t.Context(), `SELECT on_hand, reserved FROM balances b JOIN skus s ON s.id = b.sku_id WHERE s.code = $1`, sku).Scan(&onHand, &reserved); err != nil {
			t.Fatal(err)
		}
		if e.OnHand != onHand || e.Reserved != reserved {
			t.Fatalf("%s: last event %+v, table %d/%d", sku, e, onHand, reserved)
		}
	}
	if n := ts.count(`SELECT count(*) FROM stock_events`); n != total {
		t.Fatalf("%d events in the table, %d received", n, total)
	}
}

// TestSocketHousekeeping: a socket that never sends connection_init is
// closed when the init timeout passes, and one that stops answering pings is
// dropped after two keep-alive intervals; neither is left open.
func TestSocketHousekeeping(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_WS_INIT_TIMEOUT": "500ms", "INVENTORY_WS_KEEPALIVE": "300ms"})

	silent := dialWSNoInit(t, ts.url)
	start := time.Now()
	if code, reason := silent.closeCode(5 * time.Second); code == websocket.StatusNormalClosure || code == -1 {
		t.Fatalf("silent socket: %d %q", code, reason)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("silent socket closed after %s, init timeout is 500ms", d)
	}

	// A peer that acks but never answers pings (it reads nothing at all).
	mute := dialWS(t, ts.url, ts.admin, false)
	mute.ack()
	time.Sleep(2 * time.Second) // > 2 × 300ms keep-alive, not reading
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for {
		var m wsMessage
		err := wsjson.Read(ctx, mute.conn, &m) // read what was sent, answer nothing
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			t.Fatal("a peer that stopped answering pings was not disconnected")
		}
		break // the server closed the connection
	}
}

// TestSubscriptionAuthDatabaseDown: when the key cannot be looked up (the
// key table is unreadable), the socket closes with 1013 ("try again"), not
// 4401, so the client keeps its token; once the database answers, the same
// key subscribes.
func TestSubscriptionAuthDatabaseDown(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	if _, err := ts.db.Exec(t.Context(), "ALTER TABLE api_keys RENAME TO api_keys_gone"); err != nil {
		t.Fatal(err)
	}
	c := dialWS(t, ts.url, ts.admin, false)
	if code, reason := c.closeCode(5 * time.Second); code != 1013 {
		t.Fatalf("key lookup failing: closed with %d %q, want 1013", code, reason)
	}
	if _, err := ts.db.Exec(t.Context(), "ALTER TABLE api_keys_gone RENAME TO api_keys"); err != nil {
		t.Fatal(err)
	}
	c = dialWS(t, ts.url, ts.admin, false)
	c.ack()
}

// TestSubscriptionEndsWithResumeHintAtShutdown: when an instance shuts down,
// a live stockChanged subscription's socket closes with 1012 (service
// restart) and a reason naming the seq to resume after, not a quiet
// completion, so the client resubscribes elsewhere.
func TestSubscriptionEndsWithResumeHintAtShutdown(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 1)
	other, stop := ts.startInstance()
	c := dialWS(t, other, ts.admin, false)
	c.ack()
	c.subscribe("1", stockChangedSub, map[string]any{"after": 0})
	var e wsEvent
	c.data("stockChanged", &e, 5*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if code, reason := c.closeCode(5 * time.Second); code != 1012 || !strings.Contains(reason, "shutting down at seq 2") {
		t.Fatalf("at shutdown the socket closed with %d %q, want 1012 saying where to resume", code, reason)
	}
}
