package store_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"inventory/domain"
)

// Concurrent adjustments of one balance: the row lock in StockAdjust must make
// them behave as if run one at a time, so the reserved floor holds, nothing
// deadlocks, and the ledger matches the balance.

const (
	concStartOnHand  = 50
	concReserved     = 10
	concRounds       = 5 // fresh balance per round, to give races more chances
	concParallelCall = 20
)

type adjustResult struct {
	delta int
	bal   domain.Balance
	err   error
}

// runConcurrentAdjusts prepares sku@AMS with on hand 50 and reserved 10, then
// calls StockAdjust with each delta from its own goroutine, all released at once.
func runConcurrentAdjusts(t *testing.T, b *testBundle, sku string, deltas []int) []adjustResult {
	t.Helper()
	mustSKU(t, b, sku, domain.KindQuantity)
	mustReceive(t, b, sku, "AMS", concStartOnHand)
	setReserved(t, b, sku, "AMS", concReserved)

	results := make([]adjustResult, len(deltas))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, d := range deltas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			bal, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: sku, Location: "AMS", Delta: d,
				Reason: "concurrent", Reference: fmt.Sprintf("call-%d", i)})
			results[i] = adjustResult{delta: d, bal: bal.Balance, err: err}
		}()
	}
	close(start)
	wg.Wait()
	return results
}

// checkConcurrentOutcome checks the results against the database and the
// arithmetic, and returns the number of successful calls.
func checkConcurrentOutcome(t *testing.T, b *testBundle, sku string, results []adjustResult) int {
	t.Helper()
	onHand, reserved, ok := b.BalanceRow(t, sku, "AMS")
	if !ok {
		t.Fatal("balance vanished")
	}
	if reserved != concReserved || onHand < reserved || onHand < 0 {
		t.Fatalf("%s: on hand %d, reserved %d: the reserved floor broke", sku, onHand, reserved)
	}

	// The ledger, in the order it was written (the row lock serializes the
	// inserts, so id order is commit order), replays to the balance and never
	// dips below the floor on the way.
	ms := movementsOf(t, b, sku, "AMS")
	if len(ms) < 2 || ms[0].Cause != "received" || ms[1].Cause != "reserved" {
		t.Fatalf("%s: unexpected ledger start %+v", sku, ms)
	}
	running := 0
	prefix := map[int]bool{} // on hand values the balance passed through, from setup on
	var afterAdjust []int    // on hand after each adjustment, in ledger order
	var ledgerDeltas []int
	for _, m := range ms {
		running += m.OnHandDelta
		if running < concReserved && m.Cause == "adjusted" {
			t.Fatalf("%s: ledger replay reaches on hand %d below reserved %d", sku, running, concReserved)
		}
		if m.Cause == "adjusted" {
			afterAdjust = append(afterAdjust, running)
			ledgerDeltas = append(ledgerDeltas, m.OnHandDelta)
		}
		if m.Cause != "received" {
			prefix[running] = true
		}
	}
	if running != onHand {
		t.Fatalf("%s: on hand %d but the ledger sums to %d", sku, onHand, running)
	}

	var okOnHands, okDeltas []int
	for i, r := range results {
		if r.err == nil {
			okOnHands = append(okOnHands, r.bal.OnHand)
			okDeltas = append(okDeltas, r.delta)
			if r.bal.Reserved != concReserved {
				t.Fatalf("%s call %d: returned reserved %d", sku, i, r.bal.Reserved)
			}
			continue
		}
		// Every refusal is BELOW_RESERVED (never a deadlock or another error),
		// made against a state the balance really was in, and justified by it.
		e, isBusiness := domain.AsError(r.err)
		if !isBusiness || e.Code != domain.CodeBelowReserved {
			t.Fatalf("%s call %d (delta %d): want BELOW_RESERVED, got %v", sku, i, r.delta, r.err)
		}
		if e.Available == nil {
			t.Fatalf("%s call %d: BELOW_RESERVED without Available", sku, i)
		}
		if *e.Available+r.delta >= 0 {
			t.Fatalf("%s call %d (delta %d): refused with %d available", sku, i, r.delta, *e.Available)
		}
		if !prefix[*e.Available+concReserved] {
			t.Fatalf("%s call %d: refused against on hand %d, which the balance never had (ledger states %v)",
				sku, i, *e.Available+concReserved, prefix)
		}
	}
	// Exactly the successful calls are in the ledger, each returning the
	// balance its own change produced.
	slices.Sort(okOnHands)
	slices.Sort(afterAdjust)
	slices.Sort(okDeltas)
	slices.Sort(ledgerDeltas)
	if !slices.Equal(okOnHands, afterAdjust) || !slices.Equal(okDeltas, ledgerDeltas) {
		t.Fatalf("%s: successful calls returned on hand %v with deltas %v; ledger has %v with deltas %v",
			sku, okOnHands, okDeltas, afterAdjust, ledgerDeltas)
	}
	for _, m := range ms[2:] {
		if m.Cause != "adjusted" || deref(m.Reason) != "concurrent" || m.Actor != "test-admin" {
			t.Fatalf("%s: unexpected ledger row %+v", sku, m)
		}
	}
	return len(okDeltas)
}

func TestStockAdjustConcurrentDecreases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)

	deltas := make([]int, concParallelCall)
	for i := range deltas {
		deltas[i] = -5
	}
	for round := range concRounds {
		sku := fmt.Sprintf("SKU-%d", round)
		results := runConcurrentAdjusts(t, b, sku, deltas)
		succeeded := checkConcurrentOutcome(t, b, sku, results)
		// (50 - 10) / 5 = 8 fit above the floor; the other 12 must be refused.
		if succeeded != 8 {
			t.Fatalf("round %d: %d calls succeeded, want exactly 8", round, succeeded)
		}
		for i, r := range results {
			if r.err != nil {
				if e := requireCode(t, r.err, domain.CodeBelowReserved); *e.Available != 0 {
					t.Fatalf("round %d call %d: refused with %d available, want 0", round, i, *e.Available)
				}
			}
		}
		if onHand, _, _ := b.BalanceRow(t, sku, "AMS"); onHand != concReserved {
			t.Fatalf("round %d: on hand %d, want %d", round, onHand, concReserved)
		}
	}
	b.RequireReconciled(t)
}

func TestStockAdjustConcurrentMixed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)

	// Ten -7s and ten +3s, interleaved. The +3s always succeed; how many -7s
	// fit depends on the order, but never more than (50-10+30)/7 = 10, never
	// fewer than the 40/7 = 5 that fit before any +3, and a -7 is refused only
	// when fewer than 7 are available.
	deltas := make([]int, concParallelCall)
	for i := range deltas {
		deltas[i] = -7
		if i%2 == 1 {
			deltas[i] = +3
		}
	}
	for round := range concRounds {
		sku := fmt.Sprintf("SKU-%d", round)
		results := runConcurrentAdjusts(t, b, sku, deltas)
		checkConcurrentOutcome(t, b, sku, results)
		plus, minus := 0, 0
		for i, r := range results {
			switch {
			case r.err == nil && r.delta == +3:
				plus++
			case r.err == nil && r.delta == -7:
				minus++
			case r.delta == +3:
				t.Fatalf("round %d call %d: an increase was refused: %v", round, i, r.err)
			}
		}
		if plus != 10 || minus < 5 || minus > 10 {
			t.Fatalf("round %d: %d increases and %d decreases succeeded", round, plus, minus)
		}
		onHand, _, _ := b.BalanceRow(t, sku, "AMS")
		if want := concStartOnHand + 3*plus - 7*minus; onHand != want {
			t.Fatalf("round %d: on hand %d, want %d", round, onHand, want)
		}
	}
	b.RequireReconciled(t)
}
