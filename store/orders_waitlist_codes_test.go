package store_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"inventory/domain"
	"inventory/store"
)

// A cancel's units go to the waitlist first-fit in join order, in the
// cancel's own transaction: plain reserves racing it get nothing.
func TestOrderCancelFeedsWaitlist(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const sku, wh = "O-WL", "WH"
	b.shipLocation(t, wh)
	b.Stock(t, sku, wh, 6)
	b.sell(t, "cart-wl", "ORD-WL", line(sku, wh, 6))
	b.requireOrderBal(t, sku, wh, orderBal{OnHand: 6, Committed: 6}, "sold out")
	big, one, two := b.line3(t, sku, wh) // 3, 1, 2 in that order

	// One back: the 3 does not fit and keeps its place, the 1 does.
	c, err := b.cancelOrder("ORD-WL", "cancel-1", "customer_request", oq(sku, wh, 1))
	mustChange(t, "cancel 1", c, err)
	b.requireOffered(t, wh, one)
	b.requireWaiting(t, big, two)
	b.requireOrderBal(t, sku, wh, orderBal{OnHand: 6, Committed: 5, Reserved: 1}, "after cancel-1")
	// The offer was made in the cancel's transaction: its ledger row has the
	// cancel's xmin.
	var cancelTx, offerTx string
	if err := b.Pool.QueryRow(b.Ctx, `SELECT xmin::text FROM stock_movements WHERE cause = 'cancelled' AND reference = 'order ORD-WL: cancel-1'`).Scan(&cancelTx); err != nil {
		t.Fatal(err)
	}
	if err := b.Pool.QueryRow(b.Ctx, `SELECT xmin::text FROM stock_movements WHERE cause = 'reserved' AND reservation_id = $1`,
		*b.entry(t, one.ID).ReservationID).Scan(&offerTx); err != nil {
		t.Fatal(err)
	}
	if cancelTx != offerTx {
		t.Fatalf("the offer was written by transaction %s, the cancel by %s", offerTx, cancelTx)
	}

	// Three back while plain reserves race on both instances: whatever the
	// interleaving, the units go to the 3 (first in line that fits), and
	// no plain reserve gets one (nothing is free before, nothing after).
	second := b.secondInstance(t)
	stores := []*store.Store{b.Store, second}
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	start := make(chan struct{})
	for g := range 4 {
		wg.Go(func() {
			<-start
			for i := 0; ; i++ {
				last := done.Load()
				res, _, err := stores[g%2].ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: fmt.Sprintf("racer-%d", g),
					RequestKey: fmt.Sprintf("k-%d", i), TTLSeconds: 600, Lines: []domain.ReserveLine{line(sku, wh, 1)}})
				if err == nil {
					errs <- fmt.Errorf("racer %d got a unit: reservation %s", g, res.ID)
					return
				}
				if !isCode(err, domain.CodeOutOfStock) {
					errs <- fmt.Errorf("racer %d: %v", g, err)
					return
				}
				if last || i >= 200 {
					return
				}
			}
		})
	}
	close(start)
	c, err = b.cancelOrder("ORD-WL", "cancel-2", "customer_request", oq(sku, wh, 3))
	done.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	mustChange(t, "cancel 3", c, err)
	b.requireOffered(t, wh, big)
	b.requireWaiting(t, two)
	b.requireOrderBal(t, sku, wh, orderBal{OnHand: 6, Committed: 2, Reserved: 4}, "after cancel-2")
	if n := b.sqlInt(t, `SELECT count(*) FROM reservations WHERE checkout_id LIKE 'racer-%' AND status = 'held'`); n != 0 {
		t.Fatalf("%d plain reserves hold units", n)
	}
	_, _, err = b.create("late", "k", 600, line(sku, wh, 1))
	if e := requireCode(t, err, domain.CodeOutOfStock); e.Available == nil || *e.Available != 0 {
		t.Fatalf("a reserve after the cancel: OUT_OF_STOCK with available %s, want 0", optInt(e.Available))
	}

	// The last two: the 2 gets them.
	c, err = b.cancelOrder("ORD-WL", "cancel-3", "customer_request")
	order := mustChange(t, "cancel the rest", c, err)
	b.requireLine(t, order, sku, lineCounts{Cancelled: 6}, "all cancelled")
	b.requireOffered(t, wh, two)
	b.requireOrderBal(t, sku, wh, orderBal{OnHand: 6, Reserved: 6}, "after cancel-3")
	b.requireInvariants(t)
}

// A cancelled code is void: no stock moves, it is never held or sold
// again (not even when its text is imported again), and the reveal audit
// keeps it. Codes never commit, even at an ON_SHIPMENT location.
func TestOrderCancelCodesVoid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withCodesKeyring(t, b)
	const sku, wh = "O-GC", "WH"
	b.shipLocation(t, wh)
	b.codesSKU(t, sku, wh)
	b.codesImport(t, sku, wh, "B-1", codeName("OGC", 1), codeName("OGC", 2))
	order := b.sell(t, "cart-gc", "ORD-GC", line(sku, wh, 2))
	ol := lineFor(t, order, sku)
	b.requireLine(t, order, sku, lineCounts{}, "confirmed: codes never commit")
	b.requireOrderBal(t, sku, wh, orderBal{}, "codes sold at confirm")
	revealed := b.codesReveal(t, ol.ID)
	if len(revealed) != 2 {
		t.Fatalf("revealed %q, want 2 codes", revealed)
	}
	reveals := b.revealRecords(t)
	if len(reveals) != 1 || reveals[0] != (revealRecord{orderLineID: ol.ID, actor: "test-admin", codes: 2}) {
		t.Fatalf("reveal audit: %+v", reveals)
	}

	c, err := b.cancelOrder("ORD-GC", "cancel-1", "fraud", oq(sku, wh, 1))
	order = mustChange(t, "cancel 1 code", c, err)
	b.requireLine(t, order, sku, lineCounts{Cancelled: 1}, "one cancelled")
	b.requireOrderBal(t, sku, wh, orderBal{}, "one cancelled: no stock moves")
	want := ledgerRow{Reason: "fraud", Reference: "order ORD-GC: cancel-1"}
	if got := b.ledgerOf(t, sku, wh, "cancelled"); len(got) != 1 || got[0] != want {
		t.Fatalf("cancel ledger rows: %+v, want [%+v]", got, want)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM codes WHERE status = 'void' AND order_line_id = $1`, ol.ID); n != 1 {
		t.Fatalf("%d void codes on the line, want 1", n)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM codes WHERE status = 'sold' AND order_line_id = $1`, ol.ID); n != 1 {
		t.Fatalf("%d sold codes on the line, want 1", n)
	}
	var voidID int64
	if err := b.Pool.QueryRow(b.Ctx, `SELECT id FROM codes WHERE status = 'void'`).Scan(&voidID); err != nil {
		t.Fatal(err)
	}
	voidRow := b.codeRowsText(t, sku)[voidID]
	if got := b.revealRecords(t); !slices.Equal(got, reveals) {
		t.Fatalf("the cancel changed the reveal audit: %+v, was %+v", got, reveals)
	}
	// The line still reveals its sold code; the void one is the other.
	kept := b.codesReveal(t, ol.ID)
	if len(kept) != 1 || !slices.Contains(revealed, kept[0]) {
		t.Fatalf("after the cancel the line reveals %q, want one of %q", kept, revealed)
	}
	voidText := revealed[0]
	if voidText == kept[0] {
		voidText = revealed[1]
	}

	// Never sold again: its text imported again is a duplicate, and with no
	// other code a reserve is OUT_OF_STOCK.
	batch := b.codesImport(t, sku, wh, "B-2", voidText)
	if batch.Inserted != 0 || batch.Duplicates != 1 {
		t.Fatalf("re-import of the void code: %+v, want one duplicate", batch)
	}
	b.requireOrderBal(t, sku, wh, orderBal{}, "after the re-import")
	_, _, err = b.create("cart-next", "k", 600, line(sku, wh, 1))
	if e := requireCode(t, err, domain.CodeOutOfStock); e.Available == nil || *e.Available != 0 {
		t.Fatalf("reserve after the cancel: OUT_OF_STOCK available %s, want 0", optInt(e.Available))
	}
	// A new code sells; the void one stays as it was.
	b.codesImport(t, sku, wh, "B-3", codeName("OGC", 3))
	next := b.sell(t, "cart-next", "ORD-GC2", line(sku, wh, 1))
	if got := b.codesReveal(t, lineFor(t, next, sku).ID); len(got) != 1 || got[0] != codeName("OGC", 3) {
		t.Fatalf("the next order reveals %q, want the new code", got)
	}
	if got := b.codeRowsText(t, sku)[voidID]; got != voidRow {
		t.Fatalf("the void code changed: %s, was %s", got, voidRow)
	}

	// The other code ships (a record: codes were delivered at confirm);
	// then nothing is left to cancel.
	c, err = b.fulfil("ORD-GC", "ship-1")
	order = mustChange(t, "fulfil", c, err)
	b.requireLine(t, order, sku, lineCounts{Fulfilled: 1, Cancelled: 1}, "shipped")
	if got := b.ledgerOf(t, sku, wh, "fulfilled"); len(got) != 1 || got[0] != (ledgerRow{Reference: "order ORD-GC: ship-1"}) {
		t.Fatalf("fulfil ledger rows of a code: %+v, want one that moves nothing", got)
	}
	b.refusedChange(t, "cancel with nothing open", domain.CodeInvalidInput, func() (domain.OrderChange, error) {
		return b.cancelOrder("ORD-GC", "cancel-2", "fraud")
	})
	if n := b.sqlInt(t, `SELECT count(*) FROM codes WHERE status = 'void'`); n != 1 {
		t.Fatalf("%d void codes, want 1", n)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM codes WHERE status = 'void' AND (order_line_id IS NULL OR reservation_line_id IS NULL)`); n != 0 {
		t.Fatalf("%d void codes lost their links", n)
	}
	if got := b.revealRecords(t); len(got) != 3 || got[0] != reveals[0] {
		t.Fatalf("reveal audit: %+v, want the first reveal kept and two more", got)
	}
	b.requireInvariants(t)
}

// Pre-orders at an ON_SHIPMENT location: a delivery allocates to the order
// as committed (still on hand); a cancel gives a pending claim back first.
func TestOrderPreordersAtShipment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const sku, wh = "O-PRE", "WH"
	b.shipLocation(t, wh)
	b.Stock(t, sku, wh, 0)
	b.preorderSet(t, sku, wh, 5)

	x := b.mustCreate(t, "cart-x", "k", 600, line(sku, wh, 3))
	requirePreorderLine(t, x, 3, 3)
	orderX := *b.codesConfirm(t, x.ID, "ORD-X").Order
	b.requireLine(t, orderX, sku, lineCounts{Pending: 3}, "X confirmed")
	b.requireOrderBal(t, sku, wh, orderBal{PendingSupply: 5, Preordered: 3}, "X confirmed")
	b.refusedChange(t, "ship a pre-order before it arrives", domain.CodeInvalidInput, func() (domain.OrderChange, error) {
		return b.fulfil("ORD-X", "early")
	})
	b.refusedChange(t, "ship 1 of a pre-order before it arrives", domain.CodeInvalidInput, func() (domain.OrderChange, error) {
		return b.fulfil("ORD-X", "early", oq(sku, wh, 1))
	})

	// Three arrive: allocated to X as committed, still on hand.
	if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: sku, Location: wh, Quantity: 3, Reference: nextRef("PO")}); err != nil {
		t.Fatal(err)
	}
	b.requireOrderBal(t, sku, wh, orderBal{OnHand: 3, Committed: 3, PendingSupply: 2}, "3 received")
	read, err := b.Store.OrderGetByRef(b.Ctx, domain.Scope{}, "ORD-X")
	if err != nil || read == nil {
		t.Fatal(read, err)
	}
	b.requireLine(t, *read, sku, lineCounts{Committed: 3}, "X allocated")
	if got := b.ledgerOf(t, sku, wh, "preorder_allocated"); len(got) != 1 ||
		got[0] != (ledgerRow{Committed: 3, PendingSupply: -3, Preordered: -3, Reference: "order ORD-X"}) {
		t.Fatalf("allocation ledger rows: %+v, want committed +3, nothing off on_hand", got)
	}
	if a := b.availableOf(t, sku); a.Available() != 0 {
		t.Fatalf("available after the allocation: %d, want 0", a.Available())
	}

	// Y pre-orders 2 and cancels them before they arrive: the claim goes back.
	y := b.mustCreate(t, "cart-y", "k", 600, line(sku, wh, 2))
	requirePreorderLine(t, y, 2, 2)
	orderY := *b.codesConfirm(t, y.ID, "ORD-Y").Order
	b.requireOrderBal(t, sku, wh, orderBal{OnHand: 3, Committed: 3, PendingSupply: 2, Preordered: 2}, "Y confirmed")
	c, err := b.cancelOrder("ORD-Y", "cancel-1", "customer_request", oq(sku, wh, 1))
	orderY = mustChange(t, "cancel 1 of Y", c, err)
	b.requireLine(t, orderY, sku, lineCounts{Pending: 1, Cancelled: 1}, "Y cancelled 1")
	b.requireOrderBal(t, sku, wh, orderBal{OnHand: 3, Committed: 3, PendingSupply: 2, Preordered: 1}, "Y cancelled 1")
	if got := b.ledgerOf(t, sku, wh, "cancelled"); len(got) != 1 ||
		got[0] != (ledgerRow{Preordered: -1, Reason: "customer_request", Reference: "order ORD-Y: cancel-1"}) {
		t.Fatalf("cancel ledger rows: %+v, want preordered -1 only", got)
	}
	// Y's other unit arrives and is allocated: now in hand, committed; a
	// cancel of the rest gives the committed unit back.
	if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: sku, Location: wh, Quantity: 1, Reference: nextRef("PO")}); err != nil {
		t.Fatal(err)
	}
	b.requireOrderBal(t, sku, wh, orderBal{OnHand: 4, Committed: 4, PendingSupply: 1}, "Y's unit received")
	read, err = b.Store.OrderGetByRef(b.Ctx, domain.Scope{}, "ORD-Y")
	if err != nil || read == nil {
		t.Fatal(read, err)
	}
	b.requireLine(t, *read, sku, lineCounts{Committed: 1, Cancelled: 1}, "Y allocated")
	c, err = b.cancelOrder("ORD-Y", "cancel-2", "customer_request")
	orderY = mustChange(t, "cancel the rest of Y", c, err)
	b.requireLine(t, orderY, sku, lineCounts{Cancelled: 2}, "Y cancelled")
	b.requireOrderBal(t, sku, wh, orderBal{OnHand: 4, Committed: 3, PendingSupply: 1}, "Y cancelled")
	if got := b.ledgerOf(t, sku, wh, "cancelled"); len(got) != 2 ||
		got[1] != (ledgerRow{Committed: -1, Reason: "customer_request", Reference: "order ORD-Y: cancel-2"}) {
		t.Fatalf("cancel ledger rows: %+v, want the second giving the committed unit back", got)
	}

	// X ships.
	c, err = b.fulfil("ORD-X", "parcel")
	orderX = mustChange(t, "ship X", c, err)
	b.requireLine(t, orderX, sku, lineCounts{Fulfilled: 3}, "X shipped")
	b.requireOrderBal(t, sku, wh, orderBal{OnHand: 1, PendingSupply: 1}, "X shipped")

	// Z: one in stock, one pre-ordered. A cancel of one takes the pending
	// unit first; the committed one stays until cancelled too.
	z := b.mustCreate(t, "cart-z", "k", 600, line(sku, wh, 2))
	requirePreorderLine(t, z, 2, 1)
	orderZ := *b.codesConfirm(t, z.ID, "ORD-Z").Order
	b.requireLine(t, orderZ, sku, lineCounts{Pending: 1, Committed: 1}, "Z confirmed")
	b.requireOrderBal(t, sku, wh, orderBal{OnHand: 1, Committed: 1, PendingSupply: 1, Preordered: 1}, "Z confirmed")
	c, err = b.cancelOrder("ORD-Z", "cancel-1", "customer_request", oq(sku, wh, 1))
	orderZ = mustChange(t, "cancel 1 of Z", c, err)
	b.requireLine(t, orderZ, sku, lineCounts{Committed: 1, Cancelled: 1}, "Z cancelled 1")
	b.requireOrderBal(t, sku, wh, orderBal{OnHand: 1, Committed: 1, PendingSupply: 1}, "Z cancelled 1: the pending unit")
	c, err = b.cancelOrder("ORD-Z", "cancel-2", "customer_request")
	orderZ = mustChange(t, "cancel the rest of Z", c, err)
	b.requireLine(t, orderZ, sku, lineCounts{Cancelled: 2}, "Z cancelled")
	b.requireOrderBal(t, sku, wh, orderBal{OnHand: 1, PendingSupply: 1}, "Z cancelled")
	if a := b.availableOf(t, sku); a.Available() != 1 {
		t.Fatalf("available after Z's cancel: %d, want 1", a.Available())
	}
	b.requireInvariants(t)
}
