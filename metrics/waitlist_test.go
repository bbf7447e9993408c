package metrics_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"inventory/domain"
	"inventory/metrics"
	"inventory/testkit"
)

// scrape reads every sample of the handler's answer, by name and labels.
func scrape(t *testing.T, h http.Handler) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	out := map[string]float64{}
	for _, m := range regexp.MustCompile(`(?m)^(inventory_waitlist_\S+) (\S+)$`).FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("%s: %v", m[0], err)
		}
		out[m[1]] = v
	}
	return out
}

// The waitlist metrics move with the line: joins raise the waiting count and
// the longest line; an expiry that frees a unit offers it (offers 1, its
// wait of about a second in the histogram), and the hold that expired is no
// offer though its key starts with waitlist:; the offer expiring unused
// counts as such and passes the unit to the next entry (offers 2).
func TestWaitlistMetricsMove(t *testing.T) {
	t.Parallel()
	k := testkit.New(t, "test")
	m := metrics.New(nil)
	k.Store.SetWaitlistHooks(m.WatchWaitlists(k.Store))
	h := m.Handler()
	check := func(step string, want map[string]float64) {
		t.Helper()
		got := scrape(t, h)
		for name, v := range want {
			if got[name] != v {
				t.Fatalf("%s: %s = %v, want %v (all: %v)", step, name, got[name], v, got)
			}
		}
	}
	check("start", map[string]float64{"inventory_waitlist_waiting": 0, "inventory_waitlist_longest_line": 0,
		"inventory_waitlist_offers_total": 0, "inventory_waitlist_offers_expired_total": 0, "inventory_waitlist_offer_wait_seconds_count": 0})

	k.Catalog(t, domain.KindQuantity, []string{"W", "X"}, "L1")
	if _, err := k.Store.StockReceive(k.Ctx, domain.ReceiveStockInput{SKU: "W", Location: "L1", Quantity: 1, Reference: "r"}); err != nil {
		t.Fatal(err)
	}
	l1 := "L1"
	plain, _, err := k.Store.ReservationCreate(k.Ctx, domain.ReserveInput{CheckoutID: "plain", RequestKey: "k", TTLSeconds: 1,
		Lines: []domain.ReserveLine{{SKU: "W", Location: &l1, Quantity: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	// Its key starts with waitlist:, as a client's could before that prefix
	// was reserved for offers: its expiry is no offer expiring.
	if _, err := k.Pool.Exec(k.Ctx, `UPDATE reservations SET request_key = 'waitlist:' || gen_random_uuid() WHERE id = $1`, plain.ID); err != nil {
		t.Fatal(err)
	}
	for i, sku := range []string{"W", "W", "X"} {
		if _, _, err := k.Store.WaitlistJoin(k.Ctx, domain.JoinWaitlistInput{CheckoutID: fmt.Sprint("wait-", i), RequestKey: "k", SKU: sku, Quantity: 1, TTLSeconds: 600}); err != nil {
			t.Fatalf("join %d: %v", i, err)
		}
	}
	check("joined", map[string]float64{"inventory_waitlist_waiting": 3, "inventory_waitlist_longest_line": 2, "inventory_waitlist_offers_total": 0})

	time.Sleep(1100 * time.Millisecond)
	if n, err := k.Store.ReservationExpireDue(k.Ctx, 10); err != nil || n != 1 {
		t.Fatalf("expire the plain hold: %d %v", n, err)
	}
	check("offered", map[string]float64{"inventory_waitlist_waiting": 2, "inventory_waitlist_longest_line": 1,
		"inventory_waitlist_offers_total": 1, "inventory_waitlist_offers_expired_total": 0, "inventory_waitlist_offer_wait_seconds_count": 1,
		"inventory_waitlist_offer_wait_seconds_bucket{le=\"1\"}": 0, "inventory_waitlist_offer_wait_seconds_bucket{le=\"5\"}": 1})

	// The offer's hold runs out unused.
	if _, err := k.Pool.Exec(k.Ctx, `UPDATE reservations SET expires_at = now() - interval '1 second' WHERE request_key LIKE 'waitlist:%' AND status = 'held'`); err != nil {
		t.Fatal(err)
	}
	if n, err := k.Store.ReservationExpireDue(k.Ctx, 10); err != nil || n != 1 {
		t.Fatalf("expire the offer: %d %v", n, err)
	}
	check("offer expired", map[string]float64{"inventory_waitlist_waiting": 1, "inventory_waitlist_longest_line": 1,
		"inventory_waitlist_offers_total": 2, "inventory_waitlist_offers_expired_total": 1, "inventory_waitlist_offer_wait_seconds_count": 2})
}

// TestWaitlistMetricsCountCommittedOffers: offers count once they commit. A
// release whose commit fails with a deadlock (a deferred trigger raises it
// once, at commit) is run again by the store and offers again; the entry is
// offered once in the database, and the metric says 1.
func TestWaitlistMetricsCountCommittedOffers(t *testing.T) {
	t.Parallel()
	k := testkit.New(t, "test")
	m := metrics.New(nil)
	k.Store.SetWaitlistHooks(m.WatchWaitlists(k.Store))
	k.Stock(t, "W", "L1", 1)
	l1 := "L1"
	held, _, err := k.Store.ReservationCreate(k.Ctx, domain.ReserveInput{CheckoutID: "plain", RequestKey: "k", TTLSeconds: 600,
		Lines: []domain.ReserveLine{{SKU: "W", Location: &l1, Quantity: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := k.Store.WaitlistJoin(k.Ctx, domain.JoinWaitlistInput{CheckoutID: "wait", RequestKey: "k", SKU: "W", Quantity: 1, TTLSeconds: 600}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Pool.Exec(k.Ctx, `
		CREATE SEQUENCE fail_once;
		CREATE FUNCTION fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			-- nextval is not rolled back: only the first commit fails.
			IF nextval('fail_once') = 1 THEN
				RAISE EXCEPTION 'injected at commit' USING ERRCODE = '40P01';
			END IF;
			RETURN NULL;
		END $$;
		CREATE CONSTRAINT TRIGGER fail_once AFTER UPDATE ON waitlist_entries
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.status = 'offered') EXECUTE FUNCTION fail_once();`); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Store.ReservationRelease(k.Ctx, domain.Scope{}, domain.ReleaseInput{ID: held.ID, Reason: domain.ReasonOther}); err != nil {
		t.Fatal(err)
	}
	var calls, offered int
	if err := k.Pool.QueryRow(k.Ctx, `SELECT (SELECT last_value FROM fail_once), (SELECT count(*) FROM waitlist_entries WHERE status = 'offered')`).Scan(&calls, &offered); err != nil {
		t.Fatal(err)
	}
	if calls != 2 || offered != 1 {
		t.Fatalf("commits tried: %d, want 2 (one failed); offered entries: %d, want 1", calls, offered)
	}
	if got := scrape(t, m.Handler()); got["inventory_waitlist_offers_total"] != 1 || got["inventory_waitlist_offer_wait_seconds_count"] != 1 {
		t.Fatalf("one offer committed, metrics %v", got)
	}
}
