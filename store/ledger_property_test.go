package store_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"inventory/domain"
)

// TestLedgerProperty drives random receives and adjustments (many of which
// must be refused) against two SKUs at two locations and checks every outcome
// against a model in Go; afterwards every balance must equal both the model
// and the sum of its ledger rows.
func TestLedgerProperty(t *testing.T) {
	t.Parallel()
	b := setup(t) // one database; each check works on SKUs and locations of its own
	var run atomic.Int64

	type key struct{ sku, loc int }
	type modelBalance struct {
		exists           bool
		onHand, reserved int
	}

	rapid.Check(t, func(rt *rapid.T) {
		n := run.Add(1)
		skus := []string{fmt.Sprintf("P%d-A", n), fmt.Sprintf("P%d-B", n)}
		locs := []string{fmt.Sprintf("L%d-X", n), fmt.Sprintf("L%d-Y", n)}
		for _, s := range skus {
			mustSKU(rt, b, s, domain.KindQuantity)
		}
		for i, l := range locs {
			mustLocation(rt, b, l, i)
		}
		model := map[key]*modelBalance{}
		for si := range skus {
			for li := range locs {
				model[key{si, li}] = &modelBalance{}
			}
		}

		// requireBalance checks a successful call's returned balance against the model.
		requireBalance := func(what string, got domain.Balance, k key) {
			rt.Helper()
			m := model[k]
			if got.SKU != skus[k.sku] || got.Location != locs[k.loc] || got.OnHand != m.onHand || got.Reserved != m.reserved {
				rt.Fatalf("%s: returned %+v, model has on hand %d reserved %d", what, got, m.onHand, m.reserved)
			}
		}

		steps := rapid.IntRange(5, 40).Draw(rt, "steps")
		for step := range steps {
			k := key{rapid.IntRange(0, 1).Draw(rt, "sku"), rapid.IntRange(0, 1).Draw(rt, "loc")}
			m := model[k]
			sku, loc := skus[k.sku], locs[k.loc]
			before := b.state(rt)
			switch op := rapid.SampledFrom([]string{"receive", "receive", "adjust", "adjust", "adjust", "reserve", "invalid-receive"}).Draw(rt, "op"); op {
			case "receive":
				qty := rapid.IntRange(1, 40).Draw(rt, "quantity")
				bal, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: sku, Location: loc, Quantity: qty, Reference: fmt.Sprintf("step-%d", step)})
				if err != nil {
					rt.Fatalf("step %d: receive %d: %v", step, qty, err)
				}
				m.exists, m.onHand = true, m.onHand+qty
				requireBalance("receive", bal.Balance, k)

			case "invalid-receive":
				qty := rapid.SampledFrom([]int{0, -1, -50, domain.MaxQuantity + 1}).Draw(rt, "bad quantity")
				_, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: sku, Location: loc, Quantity: qty, Reference: "bad"})
				expectCode(rt, err, domain.CodeInvalidInput)
				b.requireUnchanged(rt, before, "an invalid receive")

			case "adjust":
				delta := rapid.IntRange(-60, 60).Draw(rt, "delta")
				var expected *int
				switch rapid.IntRange(0, 3).Draw(rt, "expectation") {
				case 1:
					expected = intPtr(m.onHand)
				case 2:
					expected = intPtr(m.onHand + rapid.IntRange(1, 5).Draw(rt, "stale by"))
				case 3:
					if m.onHand > 0 {
						expected = intPtr(rapid.IntRange(0, m.onHand-1).Draw(rt, "stale value"))
					}
				}
				bal, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: sku, Location: loc, Delta: delta,
					Reason: "property", Reference: fmt.Sprintf("step-%d", step), ExpectedOnHand: expected})
				switch {
				case delta == 0:
					expectCode(rt, err, domain.CodeInvalidInput)
					b.requireUnchanged(rt, before, "a zero adjustment")
				case expected != nil && *expected != m.onHand:
					expectCode(rt, err, domain.CodeStaleQuantity)
					b.requireUnchanged(rt, before, "a stale adjustment")
				case m.onHand+delta < m.reserved:
					e := expectCode(rt, err, domain.CodeBelowReserved)
					if e.Available == nil || *e.Available != m.onHand-m.reserved {
						rt.Fatalf("step %d: BELOW_RESERVED with Available %s, model has %d", step, optInt(e.Available), m.onHand-m.reserved)
					}
					b.requireUnchanged(rt, before, "an adjustment below reserved")
				default:
					if err != nil {
						rt.Fatalf("step %d: adjust %d on %d (reserved %d): %v", step, delta, m.onHand, m.reserved, err)
					}
					m.exists, m.onHand = true, m.onHand+delta
					requireBalance("adjust", bal.Balance, k)
				}

			case "reserve":
				if !m.exists {
					continue
				}
				r := rapid.IntRange(0, m.onHand).Draw(rt, "reserved")
				setReserved(rt, b, sku, loc, r)
				m.reserved = r
			}
		}

		// Every balance equals the model and the sum of its own ledger rows.
		rows, err := b.Pool.Query(b.Ctx, `
			SELECT s.code, l.code, b.on_hand, b.reserved,
			       (SELECT coalesce(sum(on_hand_delta), 0) FROM stock_movements m WHERE m.sku_id = b.sku_id AND m.location_id = b.location_id),
			       (SELECT coalesce(sum(reserved_delta), 0) FROM stock_movements m WHERE m.sku_id = b.sku_id AND m.location_id = b.location_id)
			FROM balances b JOIN skus s ON s.id = b.sku_id JOIN locations l ON l.id = b.location_id
			WHERE s.code = ANY($1)`, skus)
		if err != nil {
			rt.Fatalf("reading balances: %v", err)
		}
		seen := 0
		for rows.Next() {
			var sku, loc string
			var onHand, reserved int
			var onHandSum, reservedSum int64
			if err := rows.Scan(&sku, &loc, &onHand, &reserved, &onHandSum, &reservedSum); err != nil {
				rt.Fatalf("reading balances: %v", err)
			}
			var k key
			for i, s := range skus {
				if s == sku {
					k.sku = i
				}
			}
			for i, l := range locs {
				if l == loc {
					k.loc = i
				}
			}
			m := model[k]
			if !m.exists {
				rt.Fatalf("balance %s@%s exists but the model never created it", sku, loc)
			}
			if int64(onHand) != onHandSum || int64(reserved) != reservedSum {
				rt.Fatalf("%s@%s: on hand %d reserved %d, ledger sums %d and %d", sku, loc, onHand, reserved, onHandSum, reservedSum)
			}
			if onHand != m.onHand || reserved != m.reserved {
				rt.Fatalf("%s@%s: on hand %d reserved %d, model %d and %d", sku, loc, onHand, reserved, m.onHand, m.reserved)
			}
			seen++
		}
		if err := rows.Err(); err != nil {
			rt.Fatalf("reading balances: %v", err)
		}
		want := 0
		for _, m := range model {
			if m.exists {
				want++
			}
		}
		if seen != want {
			rt.Fatalf("%d balance rows, model has %d", seen, want)
		}
		b.RequireReconciled(rt)
	})
}

var _ tb = (*rapid.T)(nil)
