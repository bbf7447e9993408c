package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"inventory/domain"
)

// TestCoalescedBatchesGrowWithLoad: 32 buyers reserving in a closed loop,
// each on an SKU of its own, share transactions: one batch runs while
// batches keep up, and what arrives meanwhile forms the next one. Starting
// a batch for every arrival while fewer than four ran (issue 17's
// coalescer) kept four small batches going and halved the reserves per
// transaction, doubling PostgreSQL's CPU per reserve; the counts are
// checked in SQL afterwards.
func TestCoalescedBatchesGrowWithLoad(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)
	const buyers, each = 32, 25
	for i := range buyers {
		mustSKU(t, b, fmt.Sprintf("S%02d", i), domain.KindQuantity)
		mustReceive(t, b, fmt.Sprintf("S%02d", i), "AMS", each)
	}
	batches0, requests0, _ := b.Store.ReservationBatchStats()
	var wg sync.WaitGroup
	errs := make(chan error, buyers*each)
	for i := range buyers {
		wg.Go(func() {
			for k := range each {
				res, _, err := b.Store.ReservationCreate(b.Ctx, reserveOne(fmt.Sprintf("cart-%d", i), fmt.Sprintf("k%d", k), fmt.Sprintf("S%02d", i)))
				if err == nil && res.Status != domain.StatusHeld {
					err = fmt.Errorf("buyer %d reserve %d: %s", i, k, res.Status)
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	batches, requests, failed := b.Store.ReservationBatchStats()
	batches, requests = batches-batches0, requests-requests0
	perBatch := float64(requests) / float64(batches)
	t.Logf("%d reserves in %d batches: %.1f per batch", requests, batches, perBatch)
	if requests != buyers*each || failed != 0 {
		t.Fatalf("%d requests coalesced, %d batches failed; want %d and 0", requests, failed, buyers*each)
	}
	if perBatch < 8 {
		t.Fatalf("%.1f reserves per batch with %d buyers; want at least 8", perBatch, buyers)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM reservations WHERE status = 'held'`); n != buyers*each {
		t.Fatalf("%d held reservations in SQL, want %d", n, buyers*each)
	}
	b.requireInvariants(t)
}

// TestStalledBatchDoesNotHoldTheQueue: a batch stuck behind a locked
// balance row must not keep other reserves waiting: a request queued for
// batchSpreadAfter starts a batch beside it, so a reserve of another SKU is
// held at once (here within a second; about 10 ms) while the stuck one
// waits for the lock, and both are held once it is freed.
func TestStalledBatchDoesNotHoldTheQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)
	mustSKU(t, b, "HOT", domain.KindQuantity)
	mustSKU(t, b, "COLD", domain.KindQuantity)
	mustReceive(t, b, "HOT", "AMS", 10)
	mustReceive(t, b, "COLD", "AMS", 10)
	unlock := b.lockBalance(t, "HOT", "AMS")
	stuck := b.reserveAsync(b.Ctx, reserveOne("cart-hot", "k", "HOT"))
	b.waitLockWaiters(t, 1)
	for i := range 3 { // each time, the stuck batch still runs
		start := time.Now()
		ctx, cancel := context.WithTimeout(b.Ctx, 5*time.Second)
		res, _, err := b.Store.ReservationCreate(ctx, reserveOne("cart-cold", fmt.Sprintf("k%d", i), "COLD"))
		cancel()
		if err != nil || res.Status != domain.StatusHeld {
			t.Fatalf("reserve %d of COLD beside a stuck batch: %+v, %v", i, res, err)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("reserve %d of COLD took %v beside a stuck batch; want well under a second", i, took)
		}
	}
	unlock()
	if a := <-stuck; a.err != nil || a.res.Status != domain.StatusHeld {
		t.Fatalf("the stuck reserve after the lock was freed: %+v, %v", a.res, a.err)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM reservations WHERE status = 'held'`); n != 4 {
		t.Fatalf("%d held reservations, want 4", n)
	}
	b.requireInvariants(t)
}
