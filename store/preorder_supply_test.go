package store_test

import (
	"testing"

	"inventory/domain"
)

// Receiving the expected supply turns it into stock: pending supply drops by
// what arrived (never below what waiting pre-orders are still owed), so the
// server never sells more than on hand plus what is genuinely still expected.
func TestPreorderSupplyArrives(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "P1", 1)
	mustSKU(t, b, "PS", domain.KindQuantity)
	b.preorderSet(t, "PS", "P1", 10)

	// All 10 expected units arrive with no pre-order waiting.
	bal, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "PS", Location: "P1", Quantity: 10, Reference: "PO-1"})
	if err != nil || bal.OnHand != 10 || bal.PendingSupply != 0 {
		t.Fatalf("after the whole supply arrived: %+v %v; want on hand 10, nothing expected", bal, err)
	}
	// 11 cannot be sold: 10 on hand, nothing still expected.
	_, _, err = b.create("cart-A", "k", 600, line("PS", "P1", 11))
	if e := requireCode(t, err, domain.CodeOutOfStock); e.Available == nil || *e.Available != 10 {
		t.Fatalf("OUT_OF_STOCK available %s, want 10", optInt(e.Available))
	}

	// A partial delivery: 6 of 10 expected, 3 owed to a confirmed pre-order.
	mustSKU(t, b, "PT", domain.KindQuantity)
	b.preorderSet(t, "PT", "P1", 10)
	pre := b.mustCreate(t, "cart-B", "k", 600, line("PT", "P1", 3))
	requirePreorderLine(t, pre, 3, 3)
	b.codesConfirm(t, pre.ID, "ORD-B")
	bal, err = b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "PT", Location: "P1", Quantity: 6, Reference: "PO-2"})
	if err != nil || bal.OnHand != 3 || bal.PendingSupply != 4 || bal.Preordered != 0 {
		t.Fatalf("after 6 of 10 arrived: %+v %v; want 3 on hand (3 went to the pre-order) and 4 still expected", bal, err)
	}
	// Capacity is 3 on hand + 4 expected: 8 is refused, 7 is sold.
	_, _, err = b.create("cart-C", "k", 600, line("PT", "P1", 8))
	if e := requireCode(t, err, domain.CodeOutOfStock); e.Available == nil || *e.Available != 7 {
		t.Fatalf("OUT_OF_STOCK available %s, want 7", optInt(e.Available))
	}
	b.mustCreate(t, "cart-C", "k2", 600, line("PT", "P1", 7))

	// More arrives than was expected: nothing stays expected, the rest is stock.
	mustSKU(t, b, "PU", domain.KindQuantity)
	b.preorderSet(t, "PU", "P1", 2)
	if bal, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "PU", Location: "P1", Quantity: 5, Reference: "PO-3"}); err != nil ||
		bal.OnHand != 5 || bal.PendingSupply != 0 {
		t.Fatalf("after more than expected arrived: %+v %v", bal, err)
	}
	b.RequireReconciled(t)
}
