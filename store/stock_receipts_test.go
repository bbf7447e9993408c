package store_test

import (
	"sync"
	"testing"

	"inventory/domain"
	"inventory/pgtest"
	"inventory/store"
)

// TestStockReceiveRetriedIsOnce is the warehouse system that retries a
// receipt after a lost answer: the same (sku, location, reference) sent again
// (sequentially, and by many callers at once across two instances) changes
// nothing and answers the balance; the same reference with another quantity
// is IDEMPOTENCY_KEY_REUSED. Counted in SQL: on hand and the ledger.
func TestStockReceiveRetriedIsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)
	mustLocation(t, b, "BER", 2)
	mustSKU(t, b, "HP", domain.KindQuantity)
	mustSKU(t, b, "MIC", domain.KindQuantity)
	other := b.secondInstance(t)

	receipt := domain.ReceiveStockInput{SKU: "HP", Location: "AMS", Quantity: 7, Reference: "PO-7"}
	for i := range 3 {
		bal, err := b.Store.StockReceive(b.Ctx, receipt)
		if err != nil || bal.OnHand != 7 {
			t.Fatalf("receipt sent %d times: on hand %d, %v; want 7", i+1, bal.OnHand, err)
		}
	}
	if onHand, _ := b.Balance(t, "HP", "AMS"); onHand != 7 {
		t.Fatalf("3 identical receipts: on hand %d in SQL, want 7", onHand)
	}

	// Another quantity under the reference is refused and changes nothing.
	before := b.state(t)
	_, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "HP", Location: "AMS", Quantity: 8, Reference: "PO-7"})
	requireCode(t, err, domain.CodeIdempotencyKeyReused)
	b.requireUnchanged(t, before, "a reused reference")

	// The key is the triple: the reference at another balance is another receipt.
	if bal, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "HP", Location: "BER", Quantity: 2, Reference: "PO-7"}); err != nil || bal.OnHand != 2 {
		t.Fatalf("PO-7 at BER: %+v, %v", bal, err)
	}
	if bal, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "MIC", Location: "AMS", Quantity: 3, Reference: "PO-7"}); err != nil || bal.OnHand != 3 {
		t.Fatalf("PO-7 of MIC: %+v, %v", bal, err)
	}

	// 24 concurrent identical receipts over two instances: +5 once.
	const n = 24
	stores := []*store.Store{b.Store, other}
	errs := make([]error, n)
	onHands := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			bal, err := stores[i%2].StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "MIC", Location: "BER", Quantity: 5, Reference: "PO-storm"})
			onHands[i], errs[i] = bal.OnHand, err
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || onHands[i] != 5 {
			t.Fatalf("concurrent receipt %d: on hand %d, %v; want 5", i, onHands[i], errs[i])
		}
	}
	if onHand, _ := b.Balance(t, "MIC", "BER"); onHand != 5 {
		t.Fatalf("%d concurrent identical receipts: on hand %d in SQL, want 5", n, onHand)
	}
	if got := b.sqlInt(t, `SELECT count(*) FROM stock_movements m JOIN skus s ON s.id = m.sku_id JOIN locations l ON l.id = m.location_id
		WHERE s.code = 'MIC' AND l.code = 'BER' AND m.cause = 'received'`); got != 1 {
		t.Fatalf("%d concurrent identical receipts wrote %d ledger rows, want 1", n, got)
	}
	if got := b.sqlInt(t, `SELECT count(*) FROM stock_movements WHERE cause = 'received' AND reference = 'PO-7'`); got != 3 {
		t.Fatalf("PO-7: %d ledger rows, want 3 (one per balance)", got)
	}
	b.RequireReconciled(t)
}

// TestStockAdjustRetriedIsOnce: adjustStock is idempotent per (sku, location,
// reference) too. A replay answers the balance without re-checking
// expectedOnHand (which the first call changed); another delta or reason is
// IDEMPOTENCY_KEY_REUSED; a refused adjustment does not take its reference.
func TestStockAdjustRetriedIsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)
	mustSKU(t, b, "HP", domain.KindQuantity)
	mustReceive(t, b, "HP", "AMS", 10)
	other := b.secondInstance(t)

	count := domain.AdjustStockInput{SKU: "HP", Location: "AMS", Delta: -3, Reason: "damaged", Reference: "RMA-1", ExpectedOnHand: intPtr(10)}
	for i := range 3 {
		bal, err := b.Store.StockAdjust(b.Ctx, count)
		if err != nil || bal.OnHand != 7 {
			t.Fatalf("adjustment sent %d times: on hand %d, %v; want 7", i+1, bal.OnHand, err)
		}
	}
	before := b.state(t)
	for _, in := range []domain.AdjustStockInput{
		{SKU: "HP", Location: "AMS", Delta: -4, Reason: "damaged", Reference: "RMA-1"},
		{SKU: "HP", Location: "AMS", Delta: -3, Reason: "shrinkage", Reference: "RMA-1"},
	} {
		_, err := b.Store.StockAdjust(b.Ctx, in)
		requireCode(t, err, domain.CodeIdempotencyKeyReused)
	}
	b.requireUnchanged(t, before, "reused adjustment references")

	// A refused adjustment leaves its reference free.
	_, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "HP", Location: "AMS", Delta: 1, Reason: "found", Reference: "COUNT-1", ExpectedOnHand: intPtr(99)})
	requireCode(t, err, domain.CodeStaleQuantity)
	if bal, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "HP", Location: "AMS", Delta: 1, Reason: "found", Reference: "COUNT-1", ExpectedOnHand: intPtr(7)}); err != nil || bal.OnHand != 8 {
		t.Fatalf("COUNT-1 after its refusal: %+v, %v", bal, err)
	}

	// A receipt and an adjustment are separate: the same reference on both is two acts.
	if bal, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "HP", Location: "AMS", Quantity: 2, Reference: "RMA-1"}); err != nil || bal.OnHand != 10 {
		t.Fatalf("receipt RMA-1: %+v, %v", bal, err)
	}

	// Concurrent identical adjustments over two instances: applied once.
	const n = 24
	stores := []*store.Store{b.Store, other}
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = stores[i%2].StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "HP", Location: "AMS", Delta: -1, Reason: "damaged", Reference: "RMA-storm"})
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent adjustment %d: %v", i, err)
		}
	}
	if onHand, _ := b.Balance(t, "HP", "AMS"); onHand != 9 {
		t.Fatalf("%d concurrent identical adjustments of -1: on hand %d in SQL, want 9", n, onHand)
	}
	if got := b.sqlInt(t, `SELECT count(*) FROM stock_movements WHERE cause = 'adjusted' AND reference = 'RMA-storm'`); got != 1 {
		t.Fatalf("%d concurrent identical adjustments wrote %d ledger rows, want 1", n, got)
	}
	b.RequireReconciled(t)
}

// TestStockReferencesMigrationKeepsHistory: references were not unique
// before migration 00013, and ledgers hold duplicates (one reference for many
// receipts). The migration copies the first receipt of each key, so a retry
// that straddles the upgrade is a replay, and leaves setStockLevels' rows
// alone. Simulated by undoing the migration over such a ledger and running
// it again (its Up section: goose would refuse to apply an old version
// below later ones).
func TestStockReferencesMigrationKeepsHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)
	mustSKU(t, b, "HP", domain.KindQuantity)
	mustReceive(t, b, "HP", "AMS", 1)
	for _, q := range []string{
		`DROP TABLE stock_references`,
		// The old ledger: PO-1 received three times (7, 7, 5), COUNT-1
		// adjusted twice, a stock sync under SYNC-1.
		`WITH k AS (SELECT sku_id, location_id FROM balances LIMIT 1),
		      m(d, cause, reason, ref) AS (VALUES (7, 'received', NULL, 'PO-1'), (7, 'received', NULL, 'PO-1'), (5, 'received', NULL, 'PO-1'),
		                                          (-2, 'adjusted', 'damaged', 'COUNT-1'), (3, 'adjusted', 'found', 'COUNT-1'),
		                                          (4, 'adjusted', 'stock_sync', 'SYNC-1')),
		      u AS (UPDATE balances SET on_hand = on_hand + 24 RETURNING 1)
		 INSERT INTO stock_movements (sku_id, location_id, on_hand_delta, cause, reason, reference, actor)
		 SELECT k.sku_id, k.location_id, m.d, m.cause, m.reason, m.ref, 'old' FROM k, m, u`,
	} {
		if _, err := b.Pool.Exec(b.Ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	b.RequireReconciled(t)
	if _, err := b.Pool.Exec(b.Ctx, pgtest.MigrationUp(t, "00013_stock_references.sql")); err != nil {
		t.Fatalf("migrating over duplicate references: %v", err)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM stock_references WHERE reference IN ('PO-1', 'COUNT-1', 'SYNC-1')`); n != 2 {
		t.Fatalf("%d references copied, want 2 (PO-1, COUNT-1)", n)
	}
	onHand, _ := b.Balance(t, "HP", "AMS")
	if bal, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "HP", Location: "AMS", Quantity: 7, Reference: "PO-1"}); err != nil || bal.OnHand != onHand {
		t.Fatalf("retrying PO-1's first receipt after the upgrade: %+v, %v; want a replay at on hand %d", bal, err, onHand)
	}
	_, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "HP", Location: "AMS", Quantity: 5, Reference: "PO-1"})
	requireCode(t, err, domain.CodeIdempotencyKeyReused)
	if bal, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "HP", Location: "AMS", Delta: -2, Reason: "damaged", Reference: "COUNT-1"}); err != nil || bal.OnHand != onHand {
		t.Fatalf("retrying COUNT-1 after the upgrade: %+v, %v", bal, err)
	}
	if bal, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "HP", Location: "AMS", Delta: 4, Reason: "found", Reference: "SYNC-1"}); err != nil || bal.OnHand != onHand+4 {
		t.Fatalf("an adjustment under a sync's reference: %+v, %v", bal, err)
	}
	b.RequireReconciled(t)
}
