package store_test

import (
	"context"
	"testing"
	"time"

	"inventory/domain"
)

// AvailabilityHead's staleness is bounded by the start of the relay's last
// complete batch, not by a waiting event's writer transaction start, and a
// batch cut at its limit does not move that bound: an event it left behind
// still counts from its own time.
func TestAvailabilityHeadLagFromLastCompleteBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Catalog(t, domain.KindQuantity, []string{"AH"}, "AL")
	skuID, locID := b.evtIDs(t, "AH", "AL")
	insert := func(n int) {
		t.Helper()
		if _, err := b.Pool.Exec(b.Ctx, `INSERT INTO stock_events (sku_id, location_id, cause, on_hand, reserved)
			SELECT $1, $2, 'adjusted', g, 0 FROM generate_series(1, $3::int) g`, skuID, locID, n); err != nil {
			t.Fatal(err)
		}
	}
	lag := func() time.Duration {
		t.Helper()
		_, l, err := b.Store.AvailabilityHead(b.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	// A batch cut at its limit: the event left behind has waited 300ms.
	insert(3)
	time.Sleep(300 * time.Millisecond)
	if n, err := b.Store.StockEventsPublish(b.Ctx, 2); err != nil || n != 2 {
		t.Fatalf("published %d, %v; want 2", n, err)
	}
	if l := lag(); l < 300*time.Millisecond {
		t.Fatalf("after a batch cut at its limit, lag %v; want ≥ 300ms (an event committed 300ms ago still waits)", l)
	}
	if n, err := b.Store.StockEventsPublish(b.Ctx, 5000); err != nil || n != 1 {
		t.Fatalf("published %d, %v; want 1", n, err)
	}
	if l := lag(); l != 0 {
		t.Fatalf("nothing waits: lag %v, want 0", l)
	}

	// A writer whose transaction began 400ms before it committed, after
	// the last complete batch: the change committed after that batch
	// began, so the lag counts from the batch, not from the writer's start.
	tx, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(b.Ctx, `SELECT now()`); err != nil { // the transaction starts here
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	insert(1) // something to publish: the complete batch below
	published := time.Now()
	if n, err := b.Store.StockEventsPublish(b.Ctx, 5000); err != nil || n != 1 {
		t.Fatalf("published %d, %v; want 1", n, err)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := tx.Exec(b.Ctx, `INSERT INTO stock_events (sku_id, location_id, cause, on_hand, reserved) VALUES ($1, $2, 'adjusted', 9, 0)`, skuID, locID); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(b.Ctx); err != nil {
		t.Fatal(err)
	}
	since := time.Since(published)
	if l := lag(); l > since+50*time.Millisecond || l < 100*time.Millisecond {
		t.Fatalf("an event waits whose writer began 400ms ago, committed after a complete batch %v ago: lag %v, want about %v", since, l, since)
	}
}
