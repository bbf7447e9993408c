package store_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"inventory/domain"
	"inventory/store"
)

// orderAct is one planned fulfil or cancel of the concurrency test.
type orderAct struct {
	order, ref string
	cancel     bool
	lines      []domain.OrderQuantity // nil: the whole order
	twin       bool                   // a concurrent copy of the act before it (same reference and input, lines reversed)
	retry      bool                   // sent again after its answer, on the other instance, lines reversed
}

func (a orderAct) input(reversed bool) domain.OrderChangeInput {
	in := domain.OrderChangeInput{OrderRef: a.order, Reference: a.ref, Lines: slices.Clone(a.lines)}
	if a.cancel {
		in.Reason = "race_" + a.ref // the reason is part of the input
	}
	if reversed {
		slices.Reverse(in.Lines)
	}
	return in
}

func (a orderAct) call(s *store.Store, b *testBundle, reversed bool) (domain.OrderChange, error) {
	if a.cancel {
		return s.OrderCancel(b.Ctx, a.input(reversed))
	}
	return s.OrderFulfill(b.Ctx, a.input(reversed))
}

// orderAnswer is what one call answered.
type orderAnswer struct {
	act    int // index into the plan
	change domain.OrderChange
	err    error
}

// TestOrderConcurrentFulfilCancel: ten orders confirmed at an ON_SHIPMENT
// location (one SKU sold out, with shoppers waiting for it), then 50
// goroutines over two store instances ship and cancel at random — whole
// orders or some units of some lines, each act with its own reference,
// some sent twice at once and some retried afterwards with the same input.
// Every unit moves exactly once: the acknowledged answers of each order,
// ordered by how much had moved, each moved exactly what it asked for (or,
// for a whole-order act, everything there was), and the balances, the
// order lines, the actions, the ledger and the events agree with that
// model in SQL. Retries and twins answer Replayed.
func TestOrderConcurrentFulfilCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	second := b.secondInstance(t)
	stores := []*store.Store{b.Store, second}
	const (
		wh     = "WH"
		skuA   = "O-RACE-A" // 5 per order, sold out: cancels feed the line
		skuB   = "O-RACE-B" // 2 per even order, 5 to spare
		orders = 10
		acts   = 50
	)
	initial := map[string]int{skuA: 5 * orders, skuB: 2*(orders/2) + 5}
	b.shipLocation(t, wh)
	b.Stock(t, skuA, wh, initial[skuA])
	b.Stock(t, skuB, wh, initial[skuB])
	quantity := map[string]map[string]int{} // order -> sku -> units sold
	var refs []string
	for i := range orders {
		ref := fmt.Sprintf("ORD-R%02d", i)
		lines := []domain.ReserveLine{line(skuA, wh, 5)}
		quantity[ref] = map[string]int{skuA: 5}
		if i%2 == 0 {
			lines = append(lines, line(skuB, wh, 2))
			quantity[ref][skuB] = 2
		}
		b.sell(t, "cart-"+ref, ref, lines...)
		refs = append(refs, ref)
	}
	b.requireOrderBal(t, skuA, wh, orderBal{OnHand: initial[skuA], Committed: 5 * orders}, "sold")
	b.requireOrderBal(t, skuB, wh, orderBal{OnHand: initial[skuB], Committed: 2 * (orders / 2)}, "sold")
	var waiting []domain.WaitlistEntry
	for i, q := range []int{2, 1, 3, 1, 2, 4, 1} {
		waiting = append(waiting, b.mustJoin(t, fmt.Sprintf("waiter-%d", i), "k", skuA, wh, q))
	}

	seed := uint64(29)
	t.Logf("plan seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	plan := make([]orderAct, acts)
	for g := range plan {
		if g > 0 && !plan[g-1].twin && rng.IntN(6) == 0 {
			plan[g] = plan[g-1]
			plan[g].twin, plan[g].retry = true, false
			continue
		}
		a := orderAct{order: refs[rng.IntN(orders)], ref: fmt.Sprintf("act-%02d", g), cancel: rng.IntN(3) == 0, retry: rng.IntN(5) == 0}
		// Whole orders now and then: a whole-order cancel ends the order.
		if whole := rng.IntN(8); whole >= 2 || !a.cancel && whole == 1 {
			skus := []string{skuA}
			if _, ok := quantity[a.order][skuB]; ok {
				switch rng.IntN(3) {
				case 0:
					skus = []string{skuB}
				case 1:
					skus = []string{skuA, skuB}
				}
			}
			for _, sku := range skus {
				a.lines = append(a.lines, oq(sku, wh, 1+rng.IntN(3)))
			}
		}
		plan[g] = a
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	var firsts, retries []orderAnswer
	start := make(chan struct{})
	for g, a := range plan {
		wg.Go(func() {
			<-start
			c, err := a.call(stores[g%2], b, a.twin)
			var again *orderAnswer
			if a.retry {
				rc, rerr := a.call(stores[(g+1)%2], b, true)
				again = &orderAnswer{act: g, change: rc, err: rerr}
			}
			mu.Lock()
			defer mu.Unlock()
			firsts = append(firsts, orderAnswer{act: g, change: c, err: err})
			if again != nil {
				retries = append(retries, *again)
			}
		})
	}
	close(start)
	wg.Wait()

	// Each reference of an order is one act: its first calls (an act and
	// its twin) either all refused as INVALID_INPUT, or exactly one applied
	// and the others Replayed.
	byRef := map[string][]orderAnswer{}
	for _, ans := range firsts {
		if err := allowedErr(plan[ans.act].ref, ans.err, domain.CodeInvalidInput); err != nil {
			t.Error(err)
		}
		a := plan[ans.act]
		byRef[a.order+"/"+a.ref] = append(byRef[a.order+"/"+a.ref], ans)
	}
	if t.Failed() {
		t.FailNow()
	}
	type applied struct {
		act   orderAct
		order domain.Order
		moved int // units fulfilled + cancelled on the order after it
	}
	perOrder := map[string][]applied{}
	acked := map[string]bool{} // order/ref
	for key, answers := range byRef {
		var ok, replayed, refused int
		for _, ans := range answers {
			switch {
			case ans.err != nil:
				refused++
			case ans.change.Replayed:
				replayed++
			default:
				ok++
				a := plan[ans.act]
				perOrder[a.order] = append(perOrder[a.order], applied{act: a, order: ans.change.Order, moved: movedOf(ans.change.Order)})
			}
		}
		switch {
		case ok == 0 && replayed == 0:
		case ok == 1 && refused == 0:
			acked[key] = true
		default:
			t.Errorf("%s: %d applied, %d replayed, %d refused among its concurrent calls", key, ok, replayed, refused)
		}
	}
	// A retry after the answer: Replayed when the act applied, refused again
	// (room only shrinks) when it did not.
	for _, ans := range retries {
		a := plan[ans.act]
		if acked[a.order+"/"+a.ref] {
			if ans.err != nil || !ans.change.Replayed {
				t.Errorf("retry of %s/%s: %+v %v, want Replayed", a.order, a.ref, ans.change, ans.err)
			}
		} else if !isCode(ans.err, domain.CodeInvalidInput) {
			t.Errorf("retry of refused %s/%s: %+v %v, want INVALID_INPUT again", a.order, a.ref, ans.change, ans.err)
		}
	}

	// The model: per order, the applied acts in the order they ran (each
	// moved at least one unit, so the units moved so far tell the order).
	fulfilled := map[string]map[string]int{}
	cancelled := map[string]map[string]int{}
	ledgerRows := map[string]int{} // cause -> ledger rows (one per balance per act)
	actions := map[string]int{}    // kind -> acts
	units := map[string]int{}      // cause -> units
	for _, ref := range refs {
		fulfilled[ref], cancelled[ref] = map[string]int{}, map[string]int{}
		list := perOrder[ref]
		slices.SortFunc(list, func(x, y applied) int { return x.moved - y.moved })
		for i, ap := range list {
			if i > 0 && list[i-1].moved == ap.moved {
				t.Errorf("%s: acts %s and %s both answered %d units moved", ref, list[i-1].act.ref, ap.act.ref, ap.moved)
			}
			cause := "fulfilled"
			if ap.act.cancel {
				cause = "cancelled"
			}
			actions[cause]++
			touched := 0
			for sku, q := range quantity[ref] {
				l := lineFor(t, ap.order, sku)
				if l.Quantity != q || l.PendingCodes != 0 || l.Committed != q-l.Fulfilled-l.Cancelled {
					t.Errorf("%s after %s: line %s %+v does not add up", ref, ap.act.ref, sku, l)
				}
				df, dc := l.Fulfilled-fulfilled[ref][sku], l.Cancelled-cancelled[ref][sku]
				if df < 0 || dc < 0 || ap.act.cancel && df != 0 || !ap.act.cancel && dc != 0 {
					t.Errorf("%s: %s (%s) moved %d fulfilled, %d cancelled of %s", ref, ap.act.ref, cause, df, dc, sku)
				}
				moved := df + dc
				if ap.act.lines != nil {
					want := 0
					for _, asked := range ap.act.lines {
						if asked.SKU == sku {
							want = asked.Quantity
						}
					}
					if moved != want {
						t.Errorf("%s: %s asked for %d of %s and moved %d", ref, ap.act.ref, want, sku, moved)
					}
				} else if l.Fulfilled+l.Cancelled != q && (ap.act.cancel || l.Committed != 0) {
					t.Errorf("%s: %s (%s of the whole order) left %s at %+v", ref, ap.act.ref, cause, sku, l)
				}
				if moved > 0 {
					touched++
				}
				units[cause] += moved
				fulfilled[ref][sku], cancelled[ref][sku] = l.Fulfilled, l.Cancelled
			}
			if touched == 0 {
				t.Errorf("%s: %s applied and moved nothing", ref, ap.act.ref)
			}
			ledgerRows[cause] += touched
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	twins, again := 0, len(retries)
	for _, a := range plan {
		if a.twin {
			twins++
		}
	}
	t.Logf("%d acts (%d twins, %d retried): %d fulfils and %d cancels applied, %d units shipped and %d cancelled",
		acts, twins, again, actions["fulfilled"], actions["cancelled"], units["fulfilled"], units["cancelled"])
	if actions["fulfilled"] == 0 || actions["cancelled"] == 0 {
		t.Fatalf("the plan applied %v: not a race of both kinds", actions)
	}

	// SQL agrees with the model: the lines, the actions, the balances, the
	// ledger and the events.
	for _, ref := range refs {
		for sku := range quantity[ref] {
			var f, c int
			if err := b.Pool.QueryRow(b.Ctx, `
				SELECT ol.fulfilled, ol.cancelled FROM order_lines ol JOIN orders o ON o.id = ol.order_id JOIN skus s ON s.id = ol.sku_id
				WHERE o.ref = $1 AND s.code = $2`, ref, sku).Scan(&f, &c); err != nil {
				t.Fatal(err)
			}
			if f != fulfilled[ref][sku] || c != cancelled[ref][sku] {
				t.Errorf("%s line %s: stored %d fulfilled, %d cancelled; the answers say %d, %d", ref, sku, f, c, fulfilled[ref][sku], cancelled[ref][sku])
			}
		}
	}
	for kind, n := range actions {
		if got := b.sqlInt(t, `SELECT count(*) FROM order_actions WHERE kind = $1`, kind); got != n {
			t.Errorf("%d %s actions stored, %d acknowledged", got, kind, n)
		}
		if got := b.sqlInt(t, `SELECT coalesce(sum(units), 0) FROM order_actions WHERE kind = $1`, kind); got != units[kind] {
			t.Errorf("%s actions store %d units, the answers %d", kind, got, units[kind])
		}
	}
	offered := 0
	for _, e := range waiting {
		if got := b.entry(t, e.ID); got.Status == domain.WaitlistOffered {
			offered += got.Quantity
		}
	}
	for _, sku := range []string{skuA, skuB} {
		var shipped, gone, inHand int
		for _, ref := range refs {
			shipped += fulfilled[ref][sku]
			gone += fulfilled[ref][sku] + cancelled[ref][sku]
			inHand += quantity[ref][sku]
		}
		inHand -= gone
		want := orderBal{OnHand: initial[sku] - shipped, Committed: inHand}
		if sku == skuA {
			want.Reserved = offered
		}
		if got := b.orderBal(t, sku, wh); got != want {
			t.Errorf("balance %s: %+v, want %+v (%d shipped, %d in hand, %d offered)", sku, got, want, shipped, inHand, offered)
		}
		for _, cause := range []string{"fulfilled", "cancelled"} {
			var onHand, committed int
			if err := b.Pool.QueryRow(b.Ctx, `
				SELECT coalesce(sum(m.on_hand_delta), 0), coalesce(sum(m.committed_delta), 0)
				FROM stock_movements m JOIN skus s ON s.id = m.sku_id WHERE s.code = $1 AND m.cause = $2`, sku, cause).Scan(&onHand, &committed); err != nil {
				t.Fatal(err)
			}
			var moved int
			for _, ref := range refs {
				if cause == "fulfilled" {
					moved += fulfilled[ref][sku]
				} else {
					moved += cancelled[ref][sku]
				}
			}
			wantOnHand := 0
			if cause == "fulfilled" {
				wantOnHand = -moved
			}
			if onHand != wantOnHand || committed != -moved {
				t.Errorf("%s ledger of %s: on_hand %d, committed %d; want %d, %d", cause, sku, onHand, committed, wantOnHand, -moved)
			}
		}
	}
	if offered > units["cancelled"] {
		t.Errorf("%d units offered, only %d cancelled", offered, units["cancelled"])
	}
	for cause, n := range ledgerRows {
		if got := b.sqlInt(t, `SELECT count(*) FROM stock_movements WHERE cause = $1`, cause); got != n {
			t.Errorf("%d %s ledger rows, want %d (one per balance per acknowledged act)", got, cause, n)
		}
		if got := b.sqlInt(t, `SELECT count(*) FROM stock_events WHERE cause = $1 AND order_action_id IS NOT NULL`, cause); got != n {
			t.Errorf("%d %s stock events tied to their action, want %d", got, cause, n)
		}
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM stock_events WHERE cause IN ('fulfilled', 'cancelled') AND order_action_id IS NULL`); n != 0 {
		t.Errorf("%d order events without their action", n)
	}
	if t.Failed() {
		t.FailNow()
	}
	b.requireInvariants(t)
}

// movedOf counts the units of an order shipped or cancelled so far.
func movedOf(o domain.Order) int {
	n := 0
	for _, l := range o.Lines {
		n += l.Fulfilled + l.Cancelled
	}
	return n
}
