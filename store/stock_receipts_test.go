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
// nothing and answers the balance, saying Replayed (exactly one of the
// concurrent callers applied it); the same reference with another quantity
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
		if err != nil || bal.OnHand != 7 || bal.Replayed != (i > 0) {
			t.Fatalf("receipt sent %d times: on hand %d, replayed %v, %v; want 7, replayed %v", i+1, bal.OnHand, bal.Replayed, err, i > 0)
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
	replayed := make([]bool, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			bal, err := stores[i%2].StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "MIC", Location: "BER", Quantity: 5, Reference: "PO-storm"})
			onHands[i], replayed[i], errs[i] = bal.OnHand, bal.Replayed, err
		}()
	}
	close(start)
	wg.Wait()
	applied := 0
	for i := range n {
		if errs[i] != nil || onHands[i] != 5 {
			t.Fatalf("concurrent receipt %d: on hand %d, %v; want 5", i, onHands[i], errs[i])
		}
		if !replayed[i] {
			applied++
		}
	}
	if applied != 1 {
		t.Fatalf("%d concurrent identical receipts: %d answered as applied, want 1", n, applied)
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

// TestStockAdjustAppliesEveryCall: adjustStock's reference is free text for
// the ledger, not a key. Two damaged units booked under one RMA are two
// adjustments (10 → 8; before: the second was swallowed, 10 → 9), and 24
// concurrent adjustments under one reference over two instances all apply.
// None of them says replayed. Counted in SQL: on hand and the ledger.
func TestStockAdjustAppliesEveryCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)
	mustSKU(t, b, "HP", domain.KindQuantity)
	mustReceive(t, b, "HP", "AMS", 10)
	other := b.secondInstance(t)

	damaged := domain.AdjustStockInput{SKU: "HP", Location: "AMS", Delta: -1, Reason: "damaged", Reference: "RMA-3"}
	for i, want := range []int{9, 8} {
		got, err := b.Store.StockAdjust(b.Ctx, damaged)
		if err != nil || got.OnHand != want || got.Replayed {
			t.Fatalf("adjustment %d of -1 under RMA-3: on hand %d, replayed %v, %v; want %d, not replayed", i+1, got.OnHand, got.Replayed, err, want)
		}
	}
	if onHand, _ := b.Balance(t, "HP", "AMS"); onHand != 8 {
		t.Fatalf("two adjustments of -1 under one reference: on hand %d in SQL, want 8", onHand)
	}
	if got := b.sqlInt(t, `SELECT count(*) FROM stock_movements WHERE cause = 'adjusted' AND reference = 'RMA-3'`); got != 2 {
		t.Fatalf("two adjustments under RMA-3 wrote %d ledger rows, want 2", got)
	}
	// The same reference with another delta or reason is just another adjustment.
	if got, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "HP", Location: "AMS", Delta: 2, Reason: "found", Reference: "RMA-3"}); err != nil || got.OnHand != 10 || got.Replayed {
		t.Fatalf("+2 under RMA-3: %+v, %v", got, err)
	}

	// 24 concurrent adjustments of -1 under one reference, over two instances: all apply.
	const n = 24
	mustReceive(t, b, "HP", "AMS", n)
	stores := []*store.Store{b.Store, other}
	errs := make([]error, n)
	replayed := make([]bool, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			got, err := stores[i%2].StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "HP", Location: "AMS", Delta: -1, Reason: "damaged", Reference: "RMA-storm"})
			replayed[i], errs[i] = got.Replayed, err
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || replayed[i] {
			t.Fatalf("concurrent adjustment %d: replayed %v, %v", i, replayed[i], errs[i])
		}
	}
	if onHand, _ := b.Balance(t, "HP", "AMS"); onHand != 10 {
		t.Fatalf("a receipt of %d, then %d concurrent adjustments of -1 under one reference: on hand %d in SQL, want 10", n, n, onHand)
	}
	if got := b.sqlInt(t, `SELECT count(*) FROM stock_movements WHERE cause = 'adjusted' AND reference = 'RMA-storm'`); got != n {
		t.Fatalf("%d concurrent adjustments under one reference wrote %d ledger rows, want %d", n, got, n)
	}
	b.RequireReconciled(t)
}

// TestStockAdjustRequestKeyAppliesOnce: with a requestKey, adjustStock is
// idempotent per (sku, location, requestKey). A repeat changes nothing,
// answers the balance with Replayed, and is not re-checked against
// ExpectedOnHand (which the first call moved past); the key with another
// delta, reason, reference or expectedOnHand is IDEMPOTENCY_KEY_REUSED and
// changes nothing; a refused adjustment leaves its key free; the key at
// another balance is another key; 24 concurrent repeats over two instances
// apply once.
func TestStockAdjustRequestKeyAppliesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)
	mustLocation(t, b, "BER", 2)
	mustSKU(t, b, "HP", domain.KindQuantity)
	mustReceive(t, b, "HP", "AMS", 10)
	mustReceive(t, b, "HP", "BER", 10)
	other := b.secondInstance(t)

	count := domain.AdjustStockInput{SKU: "HP", Location: "AMS", Delta: -3, Reason: "damaged", Reference: "RMA-1", ExpectedOnHand: intPtr(10), RequestKey: strPtr("adj-1")}
	for i := range 3 {
		got, err := b.Store.StockAdjust(b.Ctx, count)
		if err != nil || got.OnHand != 7 || got.Replayed != (i > 0) {
			t.Fatalf("adjustment sent %d times: on hand %d, replayed %v, %v; want 7, replayed %v", i+1, got.OnHand, got.Replayed, err, i > 0)
		}
	}
	if got := b.sqlInt(t, `SELECT count(*) FROM stock_movements WHERE cause = 'adjusted' AND reference = 'RMA-1'`); got != 1 {
		t.Fatalf("one adjustment sent 3 times with one requestKey wrote %d ledger rows, want 1", got)
	}
	before := b.state(t)
	for _, change := range []func(*domain.AdjustStockInput){
		func(in *domain.AdjustStockInput) { in.Delta = -4 },
		func(in *domain.AdjustStockInput) { in.Reason = "shrinkage" },
		func(in *domain.AdjustStockInput) { in.Reference = "RMA-2" },
		func(in *domain.AdjustStockInput) { in.ExpectedOnHand = intPtr(7) },
		func(in *domain.AdjustStockInput) { in.ExpectedOnHand = nil },
	} {
		in := count
		change(&in)
		_, err := b.Store.StockAdjust(b.Ctx, in)
		if e := requireCode(t, err, domain.CodeIdempotencyKeyReused); len(e.Field) != 2 || e.Field[1] != "requestKey" {
			t.Fatalf("reused requestKey: field %v, want [input requestKey]", e.Field)
		}
	}
	b.requireUnchanged(t, before, "reused adjustment request keys")

	// The key is the triple: the same requestKey at another balance is another adjustment.
	if got, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "HP", Location: "BER", Delta: -3, Reason: "damaged", Reference: "RMA-1", RequestKey: strPtr("adj-1")}); err != nil || got.OnHand != 7 || got.Replayed {
		t.Fatalf("adj-1 at BER: %+v, %v", got, err)
	}

	// A refused adjustment leaves its key free.
	_, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "HP", Location: "AMS", Delta: 1, Reason: "found", Reference: "COUNT-1", ExpectedOnHand: intPtr(99), RequestKey: strPtr("adj-2")})
	requireCode(t, err, domain.CodeStaleQuantity)
	if got, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "HP", Location: "AMS", Delta: 1, Reason: "found", Reference: "COUNT-1", ExpectedOnHand: intPtr(7), RequestKey: strPtr("adj-2")}); err != nil || got.OnHand != 8 || got.Replayed {
		t.Fatalf("adj-2 after its refusal: %+v, %v", got, err)
	}

	// 24 concurrent identical adjustments with one requestKey over two instances: applied once.
	const n = 24
	stores := []*store.Store{b.Store, other}
	errs := make([]error, n)
	answers := make([]domain.StockChange, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			answers[i], errs[i] = stores[i%2].StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "HP", Location: "AMS", Delta: -1, Reason: "damaged", Reference: "RMA-storm", RequestKey: strPtr("adj-storm")})
		}()
	}
	close(start)
	wg.Wait()
	applied := 0
	for i, err := range errs {
		if err != nil || answers[i].OnHand != 7 {
			t.Fatalf("concurrent adjustment %d: on hand %d, %v; want 7", i, answers[i].OnHand, err)
		}
		if !answers[i].Replayed {
			applied++
		}
	}
	if applied != 1 {
		t.Fatalf("%d concurrent identical adjustments with one requestKey: %d answered as applied, want 1", n, applied)
	}
	if onHand, _ := b.Balance(t, "HP", "AMS"); onHand != 7 {
		t.Fatalf("%d concurrent identical adjustments of -1 with one requestKey: on hand %d in SQL, want 7", n, onHand)
	}
	if got := b.sqlInt(t, `SELECT count(*) FROM stock_movements WHERE cause = 'adjusted' AND reference = 'RMA-storm'`); got != 1 {
		t.Fatalf("%d concurrent identical adjustments with one requestKey wrote %d ledger rows, want 1", n, got)
	}
	b.RequireReconciled(t)
}

// TestStockReferencesMigrationKeepsHistory: references were not unique
// before migration 00013, and ledgers hold duplicates (one reference for many
// receipts). The migration copies the first receipt of each key, so a retry
// that straddles the upgrade is a replay, and leaves setStockLevels' rows
// alone. Migration 00021 then drops the adjustments' keys (an adjustment's
// reference is free text, so COUNT-1 again is another adjustment; before
// 00021 it was a replay). Simulated by undoing both migrations over such a
// ledger and running them again (their Up sections: goose would refuse to
// apply an old version below later ones).
func TestStockReferencesMigrationKeepsHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)
	mustSKU(t, b, "HP", domain.KindQuantity)
	mustReceive(t, b, "HP", "AMS", 1)
	for _, q := range []string{
		`DROP TABLE stock_references`,
		`DROP TABLE stock_adjustment_keys`,
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
	if _, err := b.Pool.Exec(b.Ctx, pgtest.MigrationUp(t, "00021_stock_adjustment_keys.sql")); err != nil {
		t.Fatalf("migrating adjustments off references: %v", err)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM stock_references WHERE reference IN ('PO-1', 'COUNT-1', 'SYNC-1')`); n != 1 {
		t.Fatalf("%d references kept, want 1 (PO-1: receipts only)", n)
	}
	onHand, _ := b.Balance(t, "HP", "AMS")
	if bal, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "HP", Location: "AMS", Quantity: 7, Reference: "PO-1"}); err != nil || bal.OnHand != onHand || !bal.Replayed {
		t.Fatalf("retrying PO-1's first receipt after the upgrade: %+v, %v; want a replay at on hand %d", bal, err, onHand)
	}
	_, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "HP", Location: "AMS", Quantity: 5, Reference: "PO-1"})
	requireCode(t, err, domain.CodeIdempotencyKeyReused)
	if bal, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "HP", Location: "AMS", Delta: -2, Reason: "damaged", Reference: "COUNT-1"}); err != nil || bal.OnHand != onHand-2 || bal.Replayed {
		t.Fatalf("COUNT-1 again after the upgrade: %+v, %v; want another adjustment, on hand %d", bal, err, onHand-2)
	}
	if bal, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "HP", Location: "AMS", Delta: 4, Reason: "found", Reference: "SYNC-1"}); err != nil || bal.OnHand != onHand+2 {
		t.Fatalf("an adjustment under a sync's reference: %+v, %v", bal, err)
	}
	// The request key of an adjustment is a key of its own: COUNT-1 as one is new.
	if bal, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "HP", Location: "AMS", Delta: -2, Reason: "damaged", Reference: "COUNT-1", RequestKey: strPtr("COUNT-1")}); err != nil || bal.OnHand != onHand || bal.Replayed {
		t.Fatalf("requestKey COUNT-1 after the upgrade: %+v, %v; want a new adjustment", bal, err)
	}
	b.RequireReconciled(t)
}
