package store_test

import (
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// Partial shipments and cancels of a two-line order at an ON_SHIPMENT
// location, and every way to ask for more than is there.
func TestOrderPartialShipmentsAndCancels(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const p, q, r, wh = "O-PART-P", "O-PART-Q", "O-PART-R", "WH"
	b.shipLocation(t, wh)
	b.Stock(t, p, wh, 8)
	b.Stock(t, q, wh, 3)
	b.Stock(t, r, wh, 3)
	b.Stock(t, p, "SHOP", 3)
	order := b.sell(t, "cart-part", "ORD-PART", line(p, wh, 5), line(q, wh, 2))
	b.requireLine(t, order, p, lineCounts{Committed: 5}, "confirmed")
	b.requireLine(t, order, q, lineCounts{Committed: 2}, "confirmed")
	b.requireOrderBal(t, p, wh, orderBal{OnHand: 8, Committed: 5}, "confirmed")
	b.requireOrderBal(t, q, wh, orderBal{OnHand: 3, Committed: 2}, "confirmed")

	// A: ship 2 of P; Q is not touched, not even by a ledger row.
	c, err := b.fulfil("ORD-PART", "A", oq(p, wh, 2))
	order = mustChange(t, "fulfil A", c, err)
	b.requireLine(t, order, p, lineCounts{Committed: 3, Fulfilled: 2}, "after A")
	b.requireLine(t, order, q, lineCounts{Committed: 2}, "after A")
	b.requireOrderBal(t, p, wh, orderBal{OnHand: 6, Committed: 3}, "after A")
	b.requireOrderBal(t, q, wh, orderBal{OnHand: 3, Committed: 2}, "after A")
	if n := len(b.ledgerOf(t, q, wh, "fulfilled")); n != 0 {
		t.Fatalf("Q has %d fulfil ledger rows after A shipped only P", n)
	}

	// More than in hand: refused with what is there, nothing changes, the
	// reference stays free.
	e := b.refusedChange(t, "ship 4 of P with 3 in hand", domain.CodeInvalidInput, func() (domain.OrderChange, error) {
		return b.fulfil("ORD-PART", "X", oq(p, wh, 4))
	})
	if e.Available == nil || *e.Available != 3 || e.Line == nil || *e.Line != 0 {
		t.Fatalf("refusal: %+v (available %s), want line 0 with 3 available", e, optInt(e.Available))
	}
	// All or nothing: the valid first line does not ship either.
	e = b.refusedChange(t, "ship 1 of Q and 4 of P", domain.CodeInvalidInput, func() (domain.OrderChange, error) {
		return b.fulfil("ORD-PART", "X", oq(q, wh, 1), oq(p, wh, 4))
	})
	if e.Line == nil || *e.Line != 1 {
		t.Fatalf("refusal names line %s, want 1", optInt(e.Line))
	}
	b.refusedChange(t, "cancel 4 of P with 3 open", domain.CodeInvalidInput, func() (domain.OrderChange, error) {
		return b.cancelOrder("ORD-PART", "X", "other", oq(p, wh, 4)) // 5 - 2 shipped = 3 open
	})
	// A SKU the order does not have, and one of its SKUs at another location.
	b.refusedChange(t, "ship a SKU the order does not have", domain.CodeInvalidInput, func() (domain.OrderChange, error) {
		return b.fulfil("ORD-PART", "X", oq(r, wh, 1))
	})
	b.refusedChange(t, "cancel a SKU the order does not have", domain.CodeInvalidInput, func() (domain.OrderChange, error) {
		return b.cancelOrder("ORD-PART", "X", "other", oq(r, wh, 1))
	})
	b.refusedChange(t, "ship P from a location the order does not use", domain.CodeInvalidInput, func() (domain.OrderChange, error) {
		return b.fulfil("ORD-PART", "X", oq(p, "SHOP", 1))
	})
	// Malformed lines: refused before anything is read.
	for name, lines := range map[string][]domain.OrderQuantity{
		"an empty list of lines": {},
		"a line given twice":     {oq(p, wh, 1), oq(p, wh, 1)},
		"a quantity of 0":        {oq(p, wh, 0)},
		"a negative quantity":    {oq(p, wh, -1)},
		"a line without a SKU":   {oq("", wh, 1)},
	} {
		b.refusedChange(t, "fulfil with "+name, domain.CodeInvalidInput, func() (domain.OrderChange, error) {
			return b.Store.OrderFulfill(b.Ctx, domain.OrderChangeInput{OrderRef: "ORD-PART", Reference: "X", Lines: lines})
		})
		b.refusedChange(t, "cancel with "+name, domain.CodeInvalidInput, func() (domain.OrderChange, error) {
			return b.Store.OrderCancel(b.Ctx, domain.OrderChangeInput{OrderRef: "ORD-PART", Reference: "X", Reason: "other", Lines: lines})
		})
	}
	b.refusedChange(t, "cancel without a reason", domain.CodeInvalidInput, func() (domain.OrderChange, error) {
		return b.cancelOrder("ORD-PART", "X", " ")
	})
	b.refusedChange(t, "fulfil without a reference", domain.CodeInvalidInput, func() (domain.OrderChange, error) {
		return b.fulfil("ORD-PART", "")
	})
	b.refusedChange(t, "ship for an unknown order", domain.CodeNotFound, func() (domain.OrderChange, error) {
		return b.fulfil("ORD-NONE", "X")
	})
	b.refusedChange(t, "cancel an unknown order", domain.CodeNotFound, func() (domain.OrderChange, error) {
		return b.cancelOrder("ORD-NONE", "X", "other")
	})
	if n := b.sqlInt(t, `SELECT count(*) FROM order_actions WHERE reference = 'X'`); n != 0 {
		t.Fatalf("%d actions recorded for refused calls", n)
	}

	// B: cancel 1 of P: committed falls, on_hand stays, 1 more available.
	c, err = b.cancelOrder("ORD-PART", "B", "customer_request", oq(p, wh, 1))
	order = mustChange(t, "cancel B", c, err)
	b.requireLine(t, order, p, lineCounts{Committed: 2, Fulfilled: 2, Cancelled: 1}, "after B")
	b.requireOrderBal(t, p, wh, orderBal{OnHand: 6, Committed: 2}, "after B")
	want := ledgerRow{Committed: -1, Reason: "customer_request", Reference: "order ORD-PART: B"}
	if got := b.ledgerOf(t, p, wh, "cancelled"); len(got) != 1 || got[0] != want {
		t.Fatalf("cancel ledger rows: %+v, want [%+v]", got, want)
	}
	if got := b.eventsOf(t, p, wh, "cancelled"); len(got) != 1 || got[0] != (eventRow{OnHand: 6, Committed: 2, ActionRef: "B"}) {
		t.Fatalf("cancel events: %+v", got)
	}

	// C: ship everything in hand: the 2 left of P and the 2 of Q.
	c, err = b.fulfil("ORD-PART", "C")
	order = mustChange(t, "fulfil C", c, err)
	b.requireLine(t, order, p, lineCounts{Fulfilled: 4, Cancelled: 1}, "after C")
	b.requireLine(t, order, q, lineCounts{Fulfilled: 2}, "after C")
	b.requireOrderBal(t, p, wh, orderBal{OnHand: 4}, "after C")
	b.requireOrderBal(t, q, wh, orderBal{OnHand: 1}, "after C")
	if got := b.ledgerOf(t, p, wh, "fulfilled"); len(got) != 2 || got[1] != (ledgerRow{OnHand: -2, Committed: -2, Reference: "order ORD-PART: C"}) {
		t.Fatalf("P fulfil ledger rows: %+v", got)
	}
	if got := b.ledgerOf(t, q, wh, "fulfilled"); len(got) != 1 || got[0] != (ledgerRow{OnHand: -2, Committed: -2, Reference: "order ORD-PART: C"}) {
		t.Fatalf("Q fulfil ledger rows: %+v", got)
	}
	type action struct {
		Ref, Kind string
		Units     int
		Reason    string
	}
	rows, err := b.Pool.Query(b.Ctx, `SELECT reference, kind, units, coalesce(reason, '') FROM order_actions ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	actions, err := pgx.CollectRows(rows, pgx.RowToStructByPos[action])
	if err != nil {
		t.Fatal(err)
	}
	if want := []action{{"A", "fulfilled", 2, ""}, {"B", "cancelled", 1, "customer_request"}, {"C", "fulfilled", 4, ""}}; !slices.Equal(actions, want) {
		t.Fatalf("order actions %+v, want %+v", actions, want)
	}

	// Nothing left to ship or cancel.
	b.refusedChange(t, "fulfil with nothing left", domain.CodeInvalidInput, func() (domain.OrderChange, error) {
		return b.fulfil("ORD-PART", "D")
	})
	b.refusedChange(t, "cancel with nothing left", domain.CodeInvalidInput, func() (domain.OrderChange, error) {
		return b.cancelOrder("ORD-PART", "E", "other")
	})
	e = b.refusedChange(t, "cancel 1 of P with nothing open", domain.CodeInvalidInput, func() (domain.OrderChange, error) {
		return b.cancelOrder("ORD-PART", "E", "other", oq(p, wh, 1))
	})
	if e.Available == nil || *e.Available != 0 {
		t.Fatalf("refusal says %s can be cancelled, want 0", optInt(e.Available))
	}
	b.requireInvariants(t)
}

// Idempotency per (orderRef, reference): a retry answers Replayed and
// changes nothing, on either instance, even when it could no longer be
// done; the reference with any other input is IDEMPOTENCY_KEY_REUSED.
func TestOrderIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const sku, other, wh = "O-IDEM", "O-IDEM-2", "WH"
	b.shipLocation(t, wh)
	b.Stock(t, sku, wh, 10)
	b.Stock(t, other, wh, 2)
	b.sell(t, "cart-idem", "ORD-IDEM", line(sku, wh, 4), line(other, wh, 1))
	second := b.secondInstance(t)

	c, err := b.fulfil("ORD-IDEM", "A", oq(sku, wh, 2), oq(other, wh, 1))
	mustChange(t, "fulfil A", c, err)
	snap := b.orderSnapshot(t)
	ledger := b.sqlInt(t, `SELECT count(*) FROM stock_movements`)
	in := domain.OrderChangeInput{OrderRef: "ORD-IDEM", Reference: "A", Lines: []domain.OrderQuantity{oq(sku, wh, 2), oq(other, wh, 1)}}
	swapped := domain.OrderChangeInput{OrderRef: "ORD-IDEM", Reference: "A", Lines: []domain.OrderQuantity{oq(other, wh, 1), oq(sku, wh, 2)}}
	for name, call := range map[string]func() (domain.OrderChange, error){
		"replay":                     func() (domain.OrderChange, error) { return b.Store.OrderFulfill(b.Ctx, in) },
		"replay, lines reordered":    func() (domain.OrderChange, error) { return b.Store.OrderFulfill(b.Ctx, swapped) },
		"replay on another instance": func() (domain.OrderChange, error) { return second.OrderFulfill(b.Ctx, in) },
	} {
		c, err := call()
		if err != nil || !c.Replayed {
			t.Fatalf("%s: %+v %v, want Replayed", name, c, err)
		}
		b.requireLine(t, c.Order, sku, lineCounts{Committed: 2, Fulfilled: 2}, name)
		b.requireOrderUnchanged(t, snap, name)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM stock_movements`); n != ledger {
		t.Fatalf("replays wrote ledger rows: %d, was %d", n, ledger)
	}
	for name, call := range map[string]func() (domain.OrderChange, error){
		"other quantity":  func() (domain.OrderChange, error) { return b.fulfil("ORD-IDEM", "A", oq(sku, wh, 1), oq(other, wh, 1)) },
		"fewer lines":     func() (domain.OrderChange, error) { return b.fulfil("ORD-IDEM", "A", oq(sku, wh, 2)) },
		"the whole order": func() (domain.OrderChange, error) { return b.fulfil("ORD-IDEM", "A") },
		"a cancel": func() (domain.OrderChange, error) {
			return b.cancelOrder("ORD-IDEM", "A", "other", oq(sku, wh, 2), oq(other, wh, 1))
		},
	} {
		b.refusedChange(t, "reference A reused: "+name, domain.CodeIdempotencyKeyReused, call)
	}

	c, err = b.cancelOrder("ORD-IDEM", "B", "customer_request", oq(sku, wh, 1))
	mustChange(t, "cancel B", c, err)
	snap = b.orderSnapshot(t)
	if c, err := second.OrderCancel(b.Ctx, domain.OrderChangeInput{OrderRef: "ORD-IDEM", Reference: "B", Reason: "customer_request",
		Lines: []domain.OrderQuantity{oq(sku, wh, 1)}}); err != nil || !c.Replayed {
		t.Fatalf("cancel B again: %+v %v, want Replayed", c, err)
	}
	b.requireOrderUnchanged(t, snap, "cancel B again")
	b.refusedChange(t, "cancel B with another reason", domain.CodeIdempotencyKeyReused, func() (domain.OrderChange, error) {
		return b.cancelOrder("ORD-IDEM", "B", "fraud", oq(sku, wh, 1))
	})
	b.refusedChange(t, "reference B as a fulfil", domain.CodeIdempotencyKeyReused, func() (domain.OrderChange, error) {
		return b.fulfil("ORD-IDEM", "B", oq(sku, wh, 1))
	})

	// Ship the last unit; A and B still replay although neither could be
	// done now.
	c, err = b.fulfil("ORD-IDEM", "C")
	order := mustChange(t, "fulfil C", c, err)
	b.requireLine(t, order, sku, lineCounts{Fulfilled: 3, Cancelled: 1}, "after C")
	snap = b.orderSnapshot(t)
	if c, err := b.Store.OrderFulfill(b.Ctx, in); err != nil || !c.Replayed {
		t.Fatalf("A after everything shipped: %+v %v, want Replayed", c, err)
	}
	if c, err := b.cancelOrder("ORD-IDEM", "B", "customer_request", oq(sku, wh, 1)); err != nil || !c.Replayed {
		t.Fatalf("B after everything shipped: %+v %v, want Replayed", c, err)
	}
	b.requireOrderUnchanged(t, snap, "late replays")

	// References are per order: A names a new shipment of another order.
	b.sell(t, "cart-idem2", "ORD-IDEM2", line(sku, wh, 2))
	c, err = b.fulfil("ORD-IDEM2", "A", oq(sku, wh, 2))
	order = mustChange(t, "fulfil A of another order", c, err)
	b.requireLine(t, order, sku, lineCounts{Fulfilled: 2}, "other order shipped")
	b.requireOrderBal(t, sku, wh, orderBal{OnHand: 5}, "both orders shipped")
	b.requireInvariants(t)
}

// A cancel's units go to the waitlist first-fit in join order, in the
// cancel's own transaction: plain reserves racing it get nothing.
