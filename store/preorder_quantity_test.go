package store_test

import (
	"testing"

	"inventory/domain"
)

// Pre-orders of a QUANTITY SKU: filled first-in-first-out by confirmation as
// stock is received or adjusted in; a line part in stock, part pre-ordered;
// OUT_OF_STOCK beyond stock plus pre-order capacity; sourced lines take
// stock by priority first, then pre-orders by priority.
func TestPreorderQuantity(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "PQ", "P1", 0)
	b.preorderSet(t, "PQ", "P1", 4)

	y := b.mustCreate(t, "cart-Y", "k", 600, line("PQ", "P1", 2))
	x := b.mustCreate(t, "cart-X", "k", 600, line("PQ", "P1", 1))
	requirePreorderLine(t, x, 1, 1)
	requirePreorderLine(t, y, 2, 2)
	b.requireFullBalance(t, "PQ", "P1", fullBalance{PendingSupply: 4, Preordered: 3}, "X and Y held")
	// Confirmed X first: X is served first although Y reserved first.
	if ol := orderLineOf(t, b.codesConfirm(t, x.ID, "ORD-X")); ol.PendingCodes != 1 || ol.Kind != domain.KindQuantity {
		t.Fatalf("X order line: %+v", ol)
	}
	if ol := orderLineOf(t, b.codesConfirm(t, y.ID, "ORD-Y")); ol.PendingCodes != 2 {
		t.Fatalf("Y order line: %+v", ol)
	}
	b.requireFullBalance(t, "PQ", "P1", fullBalance{PendingSupply: 4, Preordered: 3}, "X and Y confirmed")

	bal, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "PQ", Location: "P1", Quantity: 2, Reference: "PO-1"})
	if err != nil {
		t.Fatal(err)
	}
	if bal.OnHand != 0 || bal.Reserved != 0 || bal.PendingSupply != 2 || bal.Preordered != 1 {
		t.Fatalf("StockReceive returned %+v", bal)
	}
	if px, py := b.orderLine(t, "ORD-X").PendingCodes, b.orderLine(t, "ORD-Y").PendingCodes; px != 0 || py != 1 {
		t.Fatalf("after 2 received: X pending %d, Y pending %d; want 0 and 1", px, py)
	}
	b.requireInvariants(t)

	b.Stock(t, "PQ", "P1", 2) // Y's last unit, and one to spare
	if py := b.orderLine(t, "ORD-Y").PendingCodes; py != 0 {
		t.Fatalf("Y pending %d", py)
	}
	// 4 units were expected and 4 arrived: nothing is expected any more,
	// so the spare unit is stock, not also pre-order capacity.
	b.requireFullBalance(t, "PQ", "P1", fullBalance{OnHand: 1, PendingSupply: 0}, "all filled")

	// Quantity 3 with 1 in stock: 2 pre-ordered.
	b.preorderSet(t, "PQ", "P1", 3)
	z := b.mustCreate(t, "cart-Z", "k", 600, line("PQ", "P1", 3))
	requirePreorderLine(t, z, 3, 2)
	b.requireFullBalance(t, "PQ", "P1", fullBalance{OnHand: 1, Reserved: 1, PendingSupply: 3, Preordered: 2}, "Z held")
	before := b.state(t)
	_, _, err = b.create("cart-W", "k", 600, line("PQ", "P1", 2))
	if e := requireCode(t, err, domain.CodeOutOfStock); e.Available == nil || *e.Available != 1 {
		t.Fatalf("OUT_OF_STOCK: %+v (available %s)", e, optInt(e.Available))
	}
	b.requireUnchanged(t, before, "a refused reserve")
	if ol := orderLineOf(t, b.codesConfirm(t, z.ID, "ORD-Z")); ol.PendingCodes != 2 || ol.Quantity != 3 {
		t.Fatalf("Z order line: %+v", ol)
	}
	b.requireFullBalance(t, "PQ", "P1", fullBalance{PendingSupply: 3, Preordered: 2}, "Z confirmed")
	// An adjustment that adds stock fills pre-orders too.
	bal, err = b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "PQ", Location: "P1", Delta: 5, Reason: "found", Reference: "count"})
	if err != nil {
		t.Fatal(err)
	}
	if bal.OnHand != 3 || bal.PendingSupply != 1 || bal.Preordered != 0 {
		t.Fatalf("StockAdjust returned %+v", bal)
	}
	if pz := b.orderLine(t, "ORD-Z").PendingCodes; pz != 0 {
		t.Fatalf("Z pending %d", pz)
	}
	b.requireInvariants(t)

	// Sourced: stock by priority first (L1 has 1), then pre-orders by
	// priority (L1 1, then L2).
	mustLocation(t, b, "L1", 1)
	mustLocation(t, b, "L2", 2)
	b.Stock(t, "PS", "L1", 1)
	b.Stock(t, "PS", "L2", 0)
	b.preorderSet(t, "PS", "L1", 1)
	b.preorderSet(t, "PS", "L2", 2)
	before = b.state(t)
	_, _, err = b.create("cart-S", "k0", 600, line("PS", "", 5))
	if e := requireCode(t, err, domain.CodeOutOfStock); e.Available == nil || *e.Available != 4 {
		t.Fatalf("sourced OUT_OF_STOCK: %+v (available %s)", e, optInt(e.Available))
	}
	b.requireUnchanged(t, before, "a refused sourced reserve")
	s := b.mustCreate(t, "cart-S", "k1", 600, line("PS", "", 3))
	want := []domain.ReservationLine{{SKU: "PS", Location: "L1", Quantity: 2, PreorderQuantity: 1}, {SKU: "PS", Location: "L2", Quantity: 1, PreorderQuantity: 1}}
	if len(s.Lines) != 2 || s.Lines[0] != want[0] || s.Lines[1] != want[1] {
		t.Fatalf("sourced lines %+v, want %+v", s.Lines, want)
	}
	b.requireFullBalance(t, "PS", "L1", fullBalance{OnHand: 1, Reserved: 1, PendingSupply: 1, Preordered: 1}, "sourced hold at L1")
	b.requireFullBalance(t, "PS", "L2", fullBalance{PendingSupply: 2, Preordered: 1}, "sourced hold at L2")
	if _, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: s.ID, Reason: domain.ReasonOther}); err != nil {
		t.Fatal(err)
	}
	b.requireFullBalance(t, "PS", "L1", fullBalance{OnHand: 1, PendingSupply: 1}, "sourced hold released at L1")
	b.requireFullBalance(t, "PS", "L2", fullBalance{PendingSupply: 2}, "sourced hold released at L2")
	b.requireInvariants(t)
}
