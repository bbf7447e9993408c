package store_test

import (
	"errors"
	"testing"
	"time"

	"inventory/domain"
)

// StockEventsPrune deletes a prefix of the published events (everything up
// to the newest one older than keep), records how far it went, and
// StockEventsAfter then refuses older cursors with *domain.ErrCursorExpired
// while newer ones still work; after everything is pruned, new events
// continue from the old newest seq + 1.
func TestStockEventsPrune(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Catalog(t, domain.KindQuantity, []string{"PR"}, "PRL")
	receive := func(k int) {
		t.Helper()
		for range k {
			if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "PR", Location: "PRL", Quantity: 1, Reference: nextRef("PO")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	publishAll := func(want int) {
		t.Helper()
		if n, err := b.Store.StockEventsPublish(b.Ctx, 1000); err != nil || n != want {
			t.Fatalf("StockEventsPublish = %d, %v; want %d", n, err, want)
		}
	}
	age := func(seqs ...int64) {
		t.Helper()
		for _, s := range seqs {
			if tag, err := b.Pool.Exec(b.Ctx, `UPDATE stock_events SET published_at = now() - interval '2 hours' WHERE seq = $1`, s); err != nil || tag.RowsAffected() != 1 {
				t.Fatalf("ageing seq %d: %v %v", s, tag, err)
			}
		}
	}
	prune := func(want int) {
		t.Helper()
		if n, err := b.Store.StockEventsPrune(b.Ctx, time.Hour); err != nil || n != want {
			t.Fatalf("StockEventsPrune = %d, %v; want %d", n, err, want)
		}
	}
	watermark := func() int64 {
		t.Helper()
		var w int64
		if err := b.Pool.QueryRow(b.Ctx, `SELECT through_seq FROM stock_events_pruned`).Scan(&w); err != nil {
			t.Fatal(err)
		}
		return w
	}
	requireExpired := func(after, oldestKept int64) {
		t.Helper()
		_, err := b.Store.StockEventsAfter(b.Ctx, after, 10)
		var expired *domain.ErrCursorExpired
		if !errors.As(err, &expired) || expired.After != after || expired.OldestKept != oldestKept {
			t.Fatalf("StockEventsAfter(%d) = %v; want *domain.ErrCursorExpired{After: %d, OldestKept: %d}", after, err, after, oldestKept)
		}
	}
	requireAfter := func(after, first, last int64) {
		t.Helper()
		got := b.Published(t, after)
		seqs := make([]int64, len(got))
		for i, e := range got {
			seqs[i] = e.Seq
		}
		if first > last {
			if len(seqs) != 0 {
				t.Fatalf("StockEventsAfter(%d) = %v, want nothing", after, seqs)
			}
			return
		}
		evtRequireDense(t, "StockEventsAfter", seqs, first, last)
	}
	latest := func(want int64) {
		t.Helper()
		if s, err := b.Store.StockEventsLatest(b.Ctx); err != nil || s != want {
			t.Fatalf("StockEventsLatest = %d, %v; want %d", s, err, want)
		}
	}

	receive(10)
	publishAll(10)
	prune(0) // nothing is old
	if w := watermark(); w != 0 {
		t.Fatalf("watermark %d after pruning nothing", w)
	}
	requireAfter(0, 1, 10)

	// Old: 1..4. Pruned: 1..4.
	age(1, 2, 3, 4)
	prune(4)
	if w := watermark(); w != 4 {
		t.Fatalf("watermark %d, want 4", w)
	}
	requireExpired(0, 4)
	requireExpired(3, 4)
	requireAfter(4, 5, 10)
	requireAfter(7, 8, 10)
	latest(10)
	prune(0)
	if w := watermark(); w != 4 {
		t.Fatalf("watermark moved to %d by a pass that pruned nothing", w)
	}

	// Old: 7 only (5 and 6 are recent, as after a late commit). Pruned: the
	// prefix through 7, so the kept events stay gap-free.
	age(7)
	prune(3)
	if w := watermark(); w != 7 {
		t.Fatalf("watermark %d, want 7", w)
	}
	requireExpired(4, 7)
	requireExpired(6, 7)
	requireAfter(7, 8, 10)

	// Unpublished events are never pruned, however old.
	receive(2)
	if _, err := b.Pool.Exec(b.Ctx, `UPDATE stock_events SET at = now() - interval '2 hours', published_at = now() - interval '2 hours' WHERE seq IS NULL`); err != nil {
		t.Fatal(err)
	}
	age(8, 9, 10)
	prune(3)
	var left, unpublished int
	if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*), count(*) FILTER (WHERE seq IS NULL) FROM stock_events`).Scan(&left, &unpublished); err != nil {
		t.Fatal(err)
	}
	if left != 2 || unpublished != 2 {
		t.Fatalf("after pruning every published event: %d rows left, %d unpublished; want the 2 unpublished", left, unpublished)
	}
	if w := watermark(); w != 10 {
		t.Fatalf("watermark %d, want 10", w)
	}
	requireExpired(9, 10)
	requireAfter(10, 11, 10) // nothing yet
	latest(10)

	// Everything published is gone: new events continue at 11, not 1.
	publishAll(2)
	requireAfter(10, 11, 12)
	latest(12)
	receive(1)
	publishAll(1)
	requireAfter(10, 11, 13)
	requireExpired(0, 10)
	rows := b.evtRowsAfter(t, 0)
	if len(rows) != 3 || *rows[0].Seq != 11 || *rows[1].Seq != 12 || *rows[2].Seq != 13 {
		t.Fatalf("rows after pruning everything and publishing three: %v", rows)
	}

	// A pruned stream with no rows at all still continues from the watermark.
	age(11, 12, 13)
	prune(3)
	latest(13)
	receive(1)
	publishAll(1)
	requireAfter(13, 14, 14)
	requireExpired(12, 13)
}
