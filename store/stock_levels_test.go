package store_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"inventory/domain"
)

func level(sku, loc string, onHand int, expected ...int) domain.StockLevel {
	l := domain.StockLevel{SKU: sku, Location: loc, OnHand: onHand}
	if len(expected) > 0 {
		l.ExpectedOnHand = &expected[0]
	}
	return l
}

// errorsByLine indexes a result's per-level errors by line.
func errorsByLine(t *testing.T, res domain.StockLevelsResult) map[int]domain.Error {
	t.Helper()
	out := map[int]domain.Error{}
	for _, e := range res.Errors {
		if e.Line == nil {
			t.Fatalf("per-level error without a line: %+v", e)
		}
		out[*e.Line] = e
	}
	return out
}

// TestStockLevelsSetMixed: one call with valid and refused levels applies the
// valid ones (one ledger row and one event each), counts unchanged ones
// without writing anything, and refuses each bad level on its own line.
func TestStockLevelsSetMixed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)
	mustLocation(t, b, "BER", 2)
	mustSKU(t, b, "A", domain.KindQuantity)
	mustSKU(t, b, "B", domain.KindQuantity)
	mustSKU(t, b, "GC", domain.KindCodes)
	mustReceive(t, b, "A", "AMS", 10)
	mustReceive(t, b, "B", "AMS", 5)
	setReserved(t, b, "B", "AMS", 4)
	movementsBefore := b.sqlInt(t, `SELECT count(*) FROM stock_movements`)
	eventsBefore := b.sqlInt(t, `SELECT count(*) FROM stock_events`)

	res, err := b.Store.StockLevelsSet(b.Ctx, domain.SetStockLevelsInput{Reference: "ERP-1", Levels: []domain.StockLevel{
		level("A", "AMS", 7),      // 0 applied: 10 -> 7
		level("A", "BER", 3),      // 1 applied: new balance
		level("B", "AMS", 5),      // 2 unchanged
		level("B", "AMS", 6),      // 3 duplicate pair
		level("NOPE", "AMS", 1),   // 4 unknown SKU
		level("A", "XXX", 1),      // 5 unknown location
		level("GC", "AMS", 1),     // 6 CODES SKU
		level("B", "BER", 2, 1),   // 7 stale: on hand is 0
		level("B", "AMS", 3),      // 8 duplicate again
		level("A", "AMS", -1),     // 9 negative
		level("", "AMS", 1),       // 10 blank SKU
		level("B", "BER", 0),      // 11 duplicate of 7 (first one refused, still a duplicate)
		level("A", "AMS", 7, 999), // 12 duplicate of 0
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed || res.Applied != 2 || res.Unchanged != 1 || res.Failed != 10 || len(res.Balances) != 2 {
		t.Fatalf("result %+v", res)
	}
	if res.Balances[0].SKU != "A" || res.Balances[0].Location != "AMS" || res.Balances[0].OnHand != 7 ||
		res.Balances[1].SKU != "A" || res.Balances[1].Location != "BER" || res.Balances[1].OnHand != 3 {
		t.Fatalf("balances %+v", res.Balances)
	}
	errs := errorsByLine(t, res)
	want := map[int]domain.ErrorCode{3: domain.CodeInvalidInput, 4: domain.CodeUnknownSKU, 5: domain.CodeUnknownLocation,
		6: domain.CodeInvalidInput, 7: domain.CodeStaleQuantity, 8: domain.CodeInvalidInput, 9: domain.CodeInvalidInput,
		10: domain.CodeInvalidInput, 11: domain.CodeInvalidInput, 12: domain.CodeInvalidInput}
	for line, code := range want {
		if errs[line].Code != code {
			t.Errorf("line %d: %+v, want %s", line, errs[line], code)
		}
	}
	if errs[4].SKU != "NOPE" || errs[6].SKU != "GC" {
		t.Errorf("errors name their SKU: %+v %+v", errs[4], errs[6])
	}
	if onHand, _ := b.Balance(t, "A", "AMS"); onHand != 7 {
		t.Fatalf("A@AMS on hand %d", onHand)
	}
	if onHand, reserved := b.Balance(t, "B", "AMS"); onHand != 5 || reserved != 4 {
		t.Fatalf("B@AMS %d/%d", onHand, reserved)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM stock_movements`) - movementsBefore; n != 2 {
		t.Fatalf("%d ledger rows, want 2", n)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM stock_movements WHERE cause = 'adjusted' AND reason = 'stock_sync' AND reference = 'ERP-1' AND actor = 'test-admin'`); n != 2 {
		t.Fatalf("%d stock_sync ledger rows, want 2", n)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM stock_events`) - eventsBefore; n != 2 {
		t.Fatalf("%d events, want 2", n)
	}
	b.RequireReconciled(t)
}

// TestStockLevelsSetGuards: below-reserved and the expectedOnHand guard.
func TestStockLevelsSetGuards(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "A", "AMS", 10)
	setReserved(t, b, "A", "AMS", 6)
	res, err := b.Store.StockLevelsSet(b.Ctx, domain.SetStockLevelsInput{Reference: "g-1", Levels: []domain.StockLevel{level("A", "AMS", 5)}})
	if err != nil || res.Failed != 1 || res.Errors[0].Code != domain.CodeBelowReserved || res.Errors[0].Available == nil || *res.Errors[0].Available != 6 ||
		res.Errors[0].SKU != "A" || *res.Errors[0].Line != 0 {
		t.Fatalf("below reserved: %+v %v", res, err)
	}
	res, err = b.Store.StockLevelsSet(b.Ctx, domain.SetStockLevelsInput{Reference: "g-2", Levels: []domain.StockLevel{level("A", "AMS", 8, 9)}})
	if err != nil || res.Failed != 1 || res.Errors[0].Code != domain.CodeStaleQuantity {
		t.Fatalf("stale: %+v %v", res, err)
	}
	res, err = b.Store.StockLevelsSet(b.Ctx, domain.SetStockLevelsInput{Reference: "g-3", Levels: []domain.StockLevel{level("A", "AMS", 6, 10)}})
	if err != nil || res.Applied != 1 || res.Balances[0].OnHand != 6 || res.Balances[0].Reserved != 6 {
		t.Fatalf("guarded set to exactly reserved: %+v %v", res, err)
	}
	// Whole-call refusals.
	_, err = b.Store.StockLevelsSet(b.Ctx, domain.SetStockLevelsInput{Reference: "g-4", Levels: make([]domain.StockLevel, domain.MaxStockLevels+1)})
	expectCode(t, err, domain.CodeInvalidInput)
	_, err = b.Store.StockLevelsSet(b.Ctx, domain.SetStockLevelsInput{Reference: " ", Levels: []domain.StockLevel{level("A", "AMS", 6)}})
	expectCode(t, err, domain.CodeInvalidInput)
	b.RequireReconciled(t)
}

// TestStockLevelsSetReplay: the same reference with the same levels applies
// nothing again and answers the first outcome; with other levels it is
// IDEMPOTENCY_KEY_REUSED; concurrent calls with one reference apply once.
func TestStockLevelsSetReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "A", "AMS", 10)
	b.Stock(t, "B", "AMS", 10)
	in := domain.SetStockLevelsInput{Reference: "r-1", Levels: []domain.StockLevel{level("A", "AMS", 4), level("NOPE", "AMS", 1)}}
	first, err := b.Store.StockLevelsSet(b.Ctx, in)
	if err != nil || first.Applied != 1 || first.Failed != 1 {
		t.Fatalf("first: %+v %v", first, err)
	}
	mustReceive(t, b, "A", "AMS", 1) // the replay must not set 4 again
	again, err := b.Store.StockLevelsSet(b.Ctx, in)
	if err != nil || !again.Replayed || again.Applied != 1 || again.Failed != 1 || again.Errors[0].Code != domain.CodeUnknownSKU ||
		*again.Errors[0].Line != 1 || len(again.Balances) != 1 || again.Balances[0].OnHand != 4 {
		t.Fatalf("replay: %+v %v", again, err)
	}
	if onHand, _ := b.Balance(t, "A", "AMS"); onHand != 5 {
		t.Fatalf("replay changed stock: %d", onHand)
	}
	in.Levels[0].OnHand = 3
	_, err = b.Store.StockLevelsSet(b.Ctx, in)
	expectCode(t, err, domain.CodeIdempotencyKeyReused)

	// Concurrent calls with one reference: exactly one applies.
	var replays atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.Store.StockLevelsSet(b.Ctx, domain.SetStockLevelsInput{Reference: "r-2", Levels: []domain.StockLevel{level("B", "AMS", 2)}})
			if err != nil || res.Applied != 1 {
				t.Errorf("concurrent: %+v %v", res, err)
			}
			if res.Replayed {
				replays.Add(1)
			}
		}()
	}
	wg.Wait()
	if replays.Load() != 7 {
		t.Fatalf("%d replays of 8 calls, want 7", replays.Load())
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM stock_movements WHERE reference = 'r-2'`); n != 1 {
		t.Fatalf("%d ledger rows for r-2, want 1", n)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM stock_movements WHERE reference = 'r-1'`); n != 1 {
		t.Fatalf("%d ledger rows for r-1, want 1", n)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM stock_syncs`); n != 2 {
		t.Fatalf("%d stock_syncs rows, want 2", n)
	}
	b.RequireReconciled(t)
}

// TestStockLevelsSetConcurrentReserves: while setStockLevels lowers and
// raises stock, reserves on the same balances never oversell.
func TestStockLevelsSetConcurrentReserves(t *testing.T) {
	t.Parallel()
	b := setup(t)
	skus := []string{"S0", "S1", "S2", "S3", "S4"}
	for _, s := range skus {
		b.Stock(t, s, "AMS", 50)
		b.Stock(t, s, "BER", 50)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var held atomic.Int32
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				sku := skus[(w+i)%len(skus)]
				_, _, err := b.create(fmt.Sprintf("cart-%d", w), fmt.Sprintf("k-%d", i), 600, line(sku, "AMS", 1), line(sku, "BER", 1))
				if err == nil {
					held.Add(1)
				} else if err := allowedErr("reserve", err, domain.CodeOutOfStock); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	applied, failed := 0, 0
	for round := range 40 {
		var levels []domain.StockLevel
		for i, s := range skus {
			levels = append(levels, level(s, "BER", (round*7+i*3)%40), level(s, "AMS", (round*5+i)%30))
		}
		res, err := b.Store.StockLevelsSet(b.Ctx, domain.SetStockLevelsInput{Reference: fmt.Sprintf("sync-%d", round), Levels: levels})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range res.Errors {
			if e.Code != domain.CodeBelowReserved {
				t.Fatalf("round %d: %+v", round, e)
			}
		}
		applied, failed = applied+res.Applied, failed+res.Failed
		if n := b.sqlInt(t, `SELECT count(*) FROM balances WHERE reserved > on_hand`); n != 0 {
			t.Fatalf("oversold: %d balances", n)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("applied %d, below reserved %d, reservations %d", applied, failed, held.Load())
	if n := b.sqlInt(t, `SELECT count(*) FROM balances WHERE reserved > on_hand OR on_hand < 0`); n != 0 {
		t.Fatalf("oversold: %d balances", n)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM balances b WHERE reserved <> (SELECT coalesce(sum(rl.quantity), 0) FROM reservation_lines rl
		JOIN reservations r ON r.id = rl.reservation_id WHERE r.status = 'held' AND rl.sku_id = b.sku_id AND rl.location_id = b.location_id)`); n != 0 {
		t.Fatalf("%d balances whose reserved is not their held lines", n)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM stock_movements WHERE reason = 'stock_sync'`); n != applied {
		t.Fatalf("%d ledger rows for %d applied levels", n, applied)
	}
	b.RequireReconciled(t)
}
