package faults

import (
	"fmt"
	"testing"
	"time"

	"inventory/pgtest"
)

// TestTerminateConnectionsMidReserve: while 16 clients reserve, PostgreSQL
// ends every connection of the server (pg_terminate_backend of its
// application_name inventory-* sessions (inventory through a transaction
// pooler) in this test's database: requests,
// River, the event relay and its listener) five times, 300ms apart. Every
// request either succeeds or fails cleanly (INTERNAL or a 5xx; clients then
// retry with the same key); nothing is half-done; and the instance recovers
// by itself: ready again, new reserves held, the relay publishing, River
// expiring holds.
func TestTerminateConnectionsMidReserve(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pgtest.NewDatabase(t))
	inst := h.start("A", nil)
	h.createKeys()
	s := stock{
		locations: []string{"AMS", "BER"},
		quantity: map[string]map[string]int{
			"T-HP": {"AMS": 400, "BER": 100}, "T-CABLE": {"AMS": 400, "BER": 100},
			"T-MOUSE":   {"AMS": 400, "BER": 100},
			"T-CONSOLE": {"AMS": 40, "BER": 10},
		},
		codes: map[string]int{"T-GIFT": 300},
	}
	h.loadCatalog(inst.url, s)
	// Stock the load does not touch, for the reserves after the storm: only
	// a fault can refuse them.
	h.addSKUs(inst.url, stock{locations: s.locations, quantity: map[string]map[string]int{"T-AFTER": {"BER": 100}}, codes: map[string]int{"T-GIFT-AFTER": 40}})
	ctx := t.Context()

	l := newLedger()
	urls := func() []string { return []string{inst.url} }
	ld := h.startLoad(ctx, l, 16, "term", s, 600, urls, 5*time.Millisecond)
	defer ld.abort()
	time.Sleep(time.Second)
	var ended []int
	for range 5 {
		var n int
		if err := h.db.QueryRow(ctx, `
			SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
			FROM pg_stat_activity
			WHERE datname = current_database() AND (application_name LIKE 'inventory-%' OR application_name = 'inventory') AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		ended = append(ended, n)
		time.Sleep(300 * time.Millisecond)
	}
	stormEnd := time.Now()
	h.report("injected: pg_terminate_backend of every server connection, 5 times 300ms apart, during the load: %v connections ended", ended)
	if ended[0] == 0 {
		t.Fatal("the server had no connections to end")
	}
	time.Sleep(time.Second)
	ld.finish()
	failed := l.attempts[internal] + l.attempts[status5xx] + l.attempts[noAnswer]
	if failed == 0 {
		t.Errorf("no request failed: the storm hit nothing (attempts: %s)", l.attemptSummary())
	}
	if n := l.attempts[noAnswer]; n > 0 {
		t.Errorf("%d requests got no HTTP answer at all: the server must answer INTERNAL or 5xx, not drop the request", n)
	}
	h.report("attempts during the storm: %s; %d keys needed a retry (%d had committed before the failure and came back as replays)",
		l.attemptSummary(), l.retried, l.replayed)

	// Recovery, without a restart.
	took, ok := waitFor(20*time.Second, func() bool { return h.readyz(inst) == 200 })
	if !ok {
		t.Fatalf("/readyz not 200 %s after the storm", took)
	}
	readyAfter := time.Since(stormEnd)
	probes := 0
	_, ok = waitFor(10*time.Second, func() bool {
		in := reserveReq{CheckoutID: fmt.Sprintf("probe-%d", probes), RequestKey: "k", TTLSeconds: 600,
			Lines: []line{{SKU: "T-AFTER", Quantity: 1}}}
		probes++
		return h.untilAnswered(ctx, l, urls, 0, h.service, in, time.Now().Add(15*time.Second)).kind == held
	})
	if !ok {
		t.Fatalf("no reserve held within 10s of readiness")
	}
	firstOK := time.Since(stormEnd)
	failedAfter := 0
	var shortTTL []string
	for i := range 20 {
		in := reserveReq{CheckoutID: fmt.Sprintf("recovered-%d", i), RequestKey: "k", TTLSeconds: 600,
			Lines: []line{{SKU: "T-AFTER", Location: "BER", Quantity: 1}, {SKU: "T-GIFT-AFTER", Location: "AMS", Quantity: 1}}}
		if i < 5 {
			in.TTLSeconds = 1 // River must expire these
		}
		o := h.reserve(ctx, inst.url, h.service, in)
		l.attempt(in, o)
		if o.kind != held {
			failedAfter++
			t.Errorf("reserve %d after recovery: %s %s", i, o.kind, o.detail)
			o = h.untilAnswered(ctx, l, urls, 0, h.service, in, time.Now().Add(15*time.Second))
		} else {
			l.answer(in, o, 1)
		}
		if i < 5 && o.kind == held {
			shortTTL = append(shortTTL, o.id)
		}
	}
	relayTook, ok := waitFor(15*time.Second, func() bool {
		var n int
		if err := h.db.QueryRow(ctx, `SELECT count(*) FROM stock_events WHERE seq IS NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	if !ok {
		t.Errorf("the event relay did not publish every committed event within 15s of the storm")
	}
	expiryTook, ok := waitFor(30*time.Second, func() bool {
		var n int
		if err := h.db.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE id = ANY($1::uuid[]) AND status = 'expired'`, shortTTL).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == len(shortTTL)
	})
	if !ok {
		t.Errorf("River did not expire %d holds with a 1s TTL within 30s after the storm", len(shortTTL))
	}
	h.report("recovered by itself: /readyz 200 %.1fs after the storm, first new hold %.1fs after, %d/20 further reserves held at the first attempt, relay caught up (%.1fs), %d holds with ttl 1s expired by River (%.1fs)",
		readyAfter.Seconds(), firstOK.Seconds(), 20-failedAfter, relayTook.Seconds(), len(shortTTL), expiryTook.Seconds())

	c := h.checkStore(ctx, l)
	h.report("verified: %s, %d expired once, reconciliation empty", c, c.expired)
}
