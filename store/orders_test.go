package store_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
	"inventory/store"
)

// Committed stock (issue 29): an ON_SHIPMENT location keeps sold units on
// hand, committed, until OrderFulfill ships them; OrderCancel gives back
// what has not shipped. These tests check the counts in SQL after each step.

// shipLocation creates an ON_SHIPMENT location.
func (b *testBundle) shipLocation(t *testing.T, code string) {
	t.Helper()
	loc, err := b.Store.LocationCreate(b.Ctx, domain.CreateLocationInput{Code: code, Name: "Warehouse " + code, Fulfillment: domain.FulfillOnShipment})
	if err != nil || loc.Fulfillment != domain.FulfillOnShipment {
		t.Fatalf("LocationCreate(%s, ON_SHIPMENT): %+v %v", code, loc, err)
	}
}

// orderBal is one balance's counters, read in SQL.
type orderBal struct {
	OnHand, Reserved, Committed, PendingSupply, Preordered int
}

func (b *testBundle) orderBal(t *testing.T, sku, loc string) orderBal {
	t.Helper()
	var o orderBal
	err := b.Pool.QueryRow(b.Ctx, `
		SELECT b.on_hand, b.reserved, b.committed, b.pending_supply, b.preordered
		FROM balances b JOIN skus s ON s.id = b.sku_id JOIN locations l ON l.id = b.location_id
		WHERE s.code = $1 AND l.code = $2`, sku, loc).Scan(&o.OnHand, &o.Reserved, &o.Committed, &o.PendingSupply, &o.Preordered)
	if err != nil {
		t.Fatalf("balance %s@%s: %v", sku, loc, err)
	}
	return o
}

func (b *testBundle) requireOrderBal(t *testing.T, sku, loc string, want orderBal, when string) {
	t.Helper()
	if got := b.orderBal(t, sku, loc); got != want {
		t.Fatalf("%s: balance %s@%s is %+v, want %+v", when, sku, loc, got, want)
	}
}

// sell reserves the lines for checkout and confirms the hold as orderRef.
func (b *testBundle) sell(t *testing.T, checkout, orderRef string, lines ...domain.ReserveLine) domain.Order {
	t.Helper()
	res := b.mustCreate(t, checkout, "k-"+orderRef, 600, lines...)
	return *b.codesConfirm(t, res.ID, orderRef).Order
}

func oq(sku, loc string, q int) domain.OrderQuantity {
	return domain.OrderQuantity{SKU: sku, Location: loc, Quantity: q}
}

// fulfil calls OrderFulfill; no lines means the whole order.
func (b *testBundle) fulfil(orderRef, ref string, lines ...domain.OrderQuantity) (domain.OrderChange, error) {
	return b.Store.OrderFulfill(b.Ctx, domain.OrderChangeInput{OrderRef: orderRef, Reference: ref, Lines: lines})
}

// cancelOrder calls OrderCancel; no lines means the whole order.
func (b *testBundle) cancelOrder(orderRef, ref, reason string, lines ...domain.OrderQuantity) (domain.OrderChange, error) {
	return b.Store.OrderCancel(b.Ctx, domain.OrderChangeInput{OrderRef: orderRef, Reference: ref, Reason: reason, Lines: lines})
}

// mustChange fails the test unless a fulfil or cancel applied (not a replay).
func mustChange(t *testing.T, what string, c domain.OrderChange, err error) domain.Order {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if c.Replayed {
		t.Fatalf("%s answered Replayed for a first call", what)
	}
	return c.Order
}

// lineFor returns o's only line for sku.
func lineFor(t *testing.T, o domain.Order, sku string) domain.OrderLine {
	t.Helper()
	var found []domain.OrderLine
	for _, l := range o.Lines {
		if l.SKU == sku {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		t.Fatalf("order %s: %d lines for %s, want 1: %+v", o.Ref, len(found), sku, o.Lines)
	}
	return found[0]
}

// lineCounts is what an order line says about its units.
type lineCounts struct{ Pending, Committed, Fulfilled, Cancelled int }

func countsOf(l domain.OrderLine) lineCounts {
	return lineCounts{l.PendingCodes, l.Committed, l.Fulfilled, l.Cancelled}
}

// requireLine checks o's line for sku as answered, and the same line as
// OrderGetByRef reads it and as stored.
func (b *testBundle) requireLine(t *testing.T, o domain.Order, sku string, want lineCounts, when string) {
	t.Helper()
	if got := countsOf(lineFor(t, o, sku)); got != want {
		t.Fatalf("%s: answered line %s of %s is %+v, want %+v", when, sku, o.Ref, got, want)
	}
	read, err := b.Store.OrderGetByRef(b.Ctx, domain.Scope{}, o.Ref)
	if err != nil || read == nil {
		t.Fatalf("%s: OrderGetByRef(%s): %+v %v", when, o.Ref, read, err)
	}
	if got := countsOf(lineFor(t, *read, sku)); got != want {
		t.Fatalf("%s: read line %s of %s is %+v, want %+v", when, sku, o.Ref, got, want)
	}
	var stored [3]int
	if err := b.Pool.QueryRow(b.Ctx, `
		SELECT ol.pending, ol.fulfilled, ol.cancelled
		FROM order_lines ol JOIN orders o ON o.id = ol.order_id JOIN skus s ON s.id = ol.sku_id
		WHERE o.ref = $1 AND s.code = $2`, o.Ref, sku).Scan(&stored[0], &stored[1], &stored[2]); err != nil {
		t.Fatal(err)
	}
	if stored != [3]int{want.Pending, want.Fulfilled, want.Cancelled} {
		t.Fatalf("%s: stored line %s of %s has pending/fulfilled/cancelled %v, want %+v", when, sku, o.Ref, stored, want)
	}
}

// ledgerRow is one stock_movements row with every delta.
type ledgerRow struct {
	OnHand, Reserved, Committed, PendingSupply, Preordered int
	Reason, Reference                                      string
}

// ledgerOf returns a balance's ledger rows of one cause, oldest first.
func (b *testBundle) ledgerOf(t *testing.T, sku, loc, cause string) []ledgerRow {
	t.Helper()
	rows, err := b.Pool.Query(b.Ctx, `
		SELECT m.on_hand_delta, m.reserved_delta, m.committed_delta, m.pending_supply_delta, m.preordered_delta,
		       coalesce(m.reason, ''), coalesce(m.reference, '')
		FROM stock_movements m JOIN skus s ON s.id = m.sku_id JOIN locations l ON l.id = m.location_id
		WHERE s.code = $1 AND l.code = $2 AND m.cause = $3 ORDER BY m.id`, sku, loc, cause)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ledgerRow, error) {
		var m ledgerRow
		err := r.Scan(&m.OnHand, &m.Reserved, &m.Committed, &m.PendingSupply, &m.Preordered, &m.Reason, &m.Reference)
		return m, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// eventRow is one stock_events row: the balance as the change left it.
type eventRow struct {
	OnHand, Reserved, Committed int
	ActionRef                   string // the order action's reference, "" for none
}

// eventsOf returns a balance's stock events of one cause, oldest first.
func (b *testBundle) eventsOf(t *testing.T, sku, loc, cause string) []eventRow {
	t.Helper()
	rows, err := b.Pool.Query(b.Ctx, `
		SELECT e.on_hand, e.reserved, e.committed, coalesce(a.reference, '')
		FROM stock_events e JOIN skus s ON s.id = e.sku_id JOIN locations l ON l.id = e.location_id
		LEFT JOIN order_actions a ON a.id = e.order_action_id
		WHERE s.code = $1 AND l.code = $2 AND e.cause = $3 ORDER BY e.id`, sku, loc, cause)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (eventRow, error) {
		var e eventRow
		err := r.Scan(&e.OnHand, &e.Reserved, &e.Committed, &e.ActionRef)
		return e, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// orderSnapshot fingerprints everything a fulfil or cancel may change:
// balances whole (updated_at included), the ledger and event counts, order
// lines and actions, codes, reservations, waitlist entries.
func (b *testBundle) orderSnapshot(t *testing.T) string {
	t.Helper()
	var s string
	err := b.Pool.QueryRow(b.Ctx, `
		SELECT concat_ws(E'\n',
			coalesce((SELECT string_agg(x::text, ';' ORDER BY x.sku_id, x.location_id) FROM balances x), '-'),
			(SELECT count(*) FROM stock_movements)::text,
			(SELECT count(*) FROM stock_events)::text,
			coalesce((SELECT string_agg(x::text, ';' ORDER BY x.id) FROM order_lines x), '-'),
			coalesce((SELECT string_agg(x::text, ';' ORDER BY x.id) FROM order_actions x), '-'),
			coalesce((SELECT string_agg(x::text, ';' ORDER BY x.id) FROM codes x), '-'),
			coalesce((SELECT string_agg(x.id::text || x.status, ';' ORDER BY x.id) FROM reservations x), '-'),
			coalesce((SELECT string_agg(x.id::text || x.status, ';' ORDER BY x.id) FROM waitlist_entries x), '-'))`).Scan(&s)
	if err != nil {
		t.Fatalf("order snapshot: %v", err)
	}
	return s
}

func (b *testBundle) requireOrderUnchanged(t *testing.T, before, what string) {
	t.Helper()
	if after := b.orderSnapshot(t); after != before {
		t.Fatalf("%s changed the database:\nbefore %s\nafter  %s", what, before, after)
	}
}

// refusedChange checks that a fulfil or cancel was refused with code and
// changed nothing, and returns the error.
func (b *testBundle) refusedChange(t *testing.T, what string, code domain.ErrorCode, call func() (domain.OrderChange, error)) *domain.Error {
	t.Helper()
	before := b.orderSnapshot(t)
	c, err := call()
	if err == nil {
		t.Fatalf("%s: answered %+v, want %s", what, c, code)
	}
	e := requireCode(t, err, code)
	b.requireOrderUnchanged(t, before, what)
	return e
}

// availableOf reads a SKU's availability as the storefront does.
func (b *testBundle) availableOf(t *testing.T, sku string) domain.Availability {
	t.Helper()
	got, err := b.Store.AvailabilityList(b.Ctx, domain.AvailabilityQuery{SKUs: []string{sku}})
	if err != nil || len(got) != 1 || got[0] == nil {
		t.Fatalf("AvailabilityList(%s): %+v %v", sku, got, err)
	}
	return *got[0]
}

// The integrator's story: a warehouse that counts physical stock until
// dispatch. Sold units stay on hand, committed; a count of what is on the
// shelves leaves availability alone; a count below what is owed is refused;
// the shipment takes them off.
func TestOrderShipmentStory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const sku, wh = "O-STORY", "WH"
	b.shipLocation(t, wh)
	b.Stock(t, sku, wh, 10)

	res := b.mustCreate(t, "cart-story", "k", 600, line(sku, wh, 3))
	b.requireOrderBal(t, sku, wh, orderBal{OnHand: 10, Reserved: 3}, "held")
	order := *b.codesConfirm(t, res.ID, "ORD-STORY").Order
	b.requireLine(t, order, sku, lineCounts{Committed: 3}, "confirmed")
	b.requireOrderBal(t, sku, wh, orderBal{OnHand: 10, Committed: 3}, "confirmed")
	if a := b.availableOf(t, sku); a.OnHand() != 10 || a.Reserved() != 0 || a.Committed() != 3 || a.Available() != 7 {
		t.Fatalf("availability after confirm: %+v (available %d), want 10 on hand, 3 committed, 7 available", a, a.Available())
	}
	if got := b.ledgerOf(t, sku, wh, "confirmed"); len(got) != 1 || got[0] != (ledgerRow{Reserved: -3, Committed: 3}) {
		t.Fatalf("confirm ledger rows: %+v, want one moving 3 from reserved to committed", got)
	}
	if got := b.eventsOf(t, sku, wh, "confirmed"); len(got) != 1 || got[0] != (eventRow{OnHand: 10, Committed: 3}) {
		t.Fatalf("confirm events: %+v", got)
	}
	// The committed units are not for sale.
	before := b.state(t)
	_, _, err := b.create("cart-other", "k", 600, line(sku, wh, 8))
	if e := requireCode(t, err, domain.CodeOutOfStock); e.Available == nil || *e.Available != 7 {
		t.Fatalf("reserve of 8: OUT_OF_STOCK with available %s, want 7", optInt(e.Available))
	}
	b.requireUnchanged(t, before, "a refused reserve")

	// The WMS counts 10 on the shelves: nothing changes, 7 stay available.
	sync, err := b.Store.StockLevelsSet(b.Ctx, domain.SetStockLevelsInput{Reference: nextRef("wms"), Levels: []domain.StockLevel{{SKU: sku, Location: wh, OnHand: 10}}})
	if err != nil || sync.Unchanged != 1 || sync.Applied != 0 || sync.Failed != 0 {
		t.Fatalf("StockLevelsSet(10): %+v %v, want unchanged", sync, err)
	}
	b.requireOrderBal(t, sku, wh, orderBal{OnHand: 10, Committed: 3}, "counted 10")
	if a := b.availableOf(t, sku); a.Available() != 7 {
		t.Fatalf("available after the count: %d, want 7", a.Available())
	}

	// Counts below reserved + committed are refused and change nothing.
	before = b.state(t)
	snap := b.orderSnapshot(t)
	sync, err = b.Store.StockLevelsSet(b.Ctx, domain.SetStockLevelsInput{Reference: nextRef("wms"), Levels: []domain.StockLevel{{SKU: sku, Location: wh, OnHand: 2}}})
	if err != nil || sync.Failed != 1 || sync.Applied != 0 || len(sync.Errors) != 1 || sync.Errors[0].Code != domain.CodeBelowReserved ||
		sync.Errors[0].Available == nil || *sync.Errors[0].Available != 3 {
		t.Fatalf("StockLevelsSet(2): %+v %v, want BELOW_RESERVED with 3 the lowest allowed", sync, err)
	}
	b.requireUnchanged(t, before, "a refused stock level")
	_, err = b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: sku, Location: wh, Delta: -8, Reason: "shrinkage", Reference: nextRef("adj")})
	if e := requireCode(t, err, domain.CodeBelowReserved); e.Available == nil || *e.Available != 7 {
		t.Fatalf("StockAdjust(-8): BELOW_RESERVED with removable %s, want 7", optInt(e.Available))
	}
	b.requireUnchanged(t, before, "a refused adjustment")
	b.requireOrderUnchanged(t, snap, "refused counts")

	// A held unit counts too: 3 committed + 1 reserved.
	hold := b.mustCreate(t, "cart-hold", "k", 600, line(sku, wh, 1))
	before = b.state(t)
	sync, err = b.Store.StockLevelsSet(b.Ctx, domain.SetStockLevelsInput{Reference: nextRef("wms"), Levels: []domain.StockLevel{{SKU: sku, Location: wh, OnHand: 3}}})
	if err != nil || sync.Failed != 1 || len(sync.Errors) != 1 || sync.Errors[0].Code != domain.CodeBelowReserved ||
		sync.Errors[0].Available == nil || *sync.Errors[0].Available != 4 {
		t.Fatalf("StockLevelsSet(3) with 1 held: %+v %v, want BELOW_RESERVED, lowest 4", sync, err)
	}
	b.requireUnchanged(t, before, "a refused stock level with a hold")
	if _, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: hold.ID, Reason: domain.ReasonOther}); err != nil {
		t.Fatal(err)
	}

	// The parcel leaves: on_hand and committed fall together.
	c, err := b.fulfil("ORD-STORY", "parcel-1")
	order = mustChange(t, "fulfil", c, err)
	b.requireLine(t, order, sku, lineCounts{Fulfilled: 3}, "fulfilled")
	b.requireOrderBal(t, sku, wh, orderBal{OnHand: 7}, "fulfilled")
	if a := b.availableOf(t, sku); a.Available() != 7 || a.Committed() != 0 {
		t.Fatalf("availability after shipping: %+v", a)
	}
	want := ledgerRow{OnHand: -3, Committed: -3, Reference: "order ORD-STORY: parcel-1"}
	if got := b.ledgerOf(t, sku, wh, "fulfilled"); len(got) != 1 || got[0] != want {
		t.Fatalf("fulfil ledger rows: %+v, want [%+v]", got, want)
	}
	if got := b.eventsOf(t, sku, wh, "fulfilled"); len(got) != 1 || got[0] != (eventRow{OnHand: 7, ActionRef: "parcel-1"}) {
		t.Fatalf("fulfil events: %+v, want one leaving 7 on hand, nothing committed, tied to the action", got)
	}
	var kind, lines string
	var units int
	if err := b.Pool.QueryRow(b.Ctx, `SELECT kind, units, lines::text FROM order_actions WHERE reference = 'parcel-1'`).Scan(&kind, &units, &lines); err != nil {
		t.Fatal(err)
	}
	if kind != "fulfilled" || units != 3 {
		t.Fatalf("order action: %s of %d units (%s), want fulfilled, 3", kind, units, lines)
	}
	// After shipping the count of 7 on the shelves agrees.
	sync, err = b.Store.StockLevelsSet(b.Ctx, domain.SetStockLevelsInput{Reference: nextRef("wms"), Levels: []domain.StockLevel{{SKU: sku, Location: wh, OnHand: 7}}})
	if err != nil || sync.Unchanged != 1 {
		t.Fatalf("StockLevelsSet(7) after shipping: %+v %v", sync, err)
	}
	b.requireInvariants(t)
}

// ON_CONFIRM (the default) is as before: a confirm takes the units off
// on_hand; a fulfil only records the shipment; a cancel puts the units back.
func TestOrderOnConfirmLocation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const sku, shop = "O-CONF", "SHOP"
	b.Stock(t, sku, shop, 10)
	order := b.sell(t, "cart-conf", "ORD-CONF", line(sku, shop, 4))
	b.requireLine(t, order, sku, lineCounts{}, "confirmed")
	b.requireOrderBal(t, sku, shop, orderBal{OnHand: 6}, "confirmed")
	if got := b.ledgerOf(t, sku, shop, "confirmed"); len(got) != 1 || got[0] != (ledgerRow{OnHand: -4, Reserved: -4}) {
		t.Fatalf("confirm ledger rows: %+v", got)
	}

	c, err := b.fulfil("ORD-CONF", "ship-1", oq(sku, shop, 3))
	order = mustChange(t, "fulfil 3", c, err)
	b.requireLine(t, order, sku, lineCounts{Fulfilled: 3}, "fulfilled 3")
	b.requireOrderBal(t, sku, shop, orderBal{OnHand: 6}, "fulfilled 3")
	if got := b.ledgerOf(t, sku, shop, "fulfilled"); len(got) != 1 || got[0] != (ledgerRow{Reference: "order ORD-CONF: ship-1"}) {
		t.Fatalf("fulfil ledger rows: %+v, want one that moves nothing", got)
	}
	if got := b.eventsOf(t, sku, shop, "fulfilled"); len(got) != 1 || got[0] != (eventRow{OnHand: 6, ActionRef: "ship-1"}) {
		t.Fatalf("fulfil events: %+v", got)
	}

	// Two to cancel with one open: refused, nothing changes.
	b.refusedChange(t, "cancel of 2 with 1 open", domain.CodeInvalidInput, func() (domain.OrderChange, error) {
		return b.cancelOrder("ORD-CONF", "cancel-x", "customer_request", oq(sku, shop, 2))
	})
	c, err = b.cancelOrder("ORD-CONF", "cancel-1", "customer_request")
	order = mustChange(t, "cancel the rest", c, err)
	b.requireLine(t, order, sku, lineCounts{Fulfilled: 3, Cancelled: 1}, "cancelled 1")
	b.requireOrderBal(t, sku, shop, orderBal{OnHand: 7}, "cancelled 1")
	want := ledgerRow{OnHand: 1, Reason: "customer_request", Reference: "order ORD-CONF: cancel-1"}
	if got := b.ledgerOf(t, sku, shop, "cancelled"); len(got) != 1 || got[0] != want {
		t.Fatalf("cancel ledger rows: %+v, want [%+v]", got, want)
	}
	if got := b.eventsOf(t, sku, shop, "cancelled"); len(got) != 1 || got[0] != (eventRow{OnHand: 7, ActionRef: "cancel-1"}) {
		t.Fatalf("cancel events: %+v", got)
	}
	if a := b.availableOf(t, sku); a.Available() != 7 {
		t.Fatalf("available after the cancel: %d, want 7", a.Available())
	}

	// A second order: cancel 2 of 4 puts 2 back on on_hand.
	order = b.sell(t, "cart-conf2", "ORD-CONF2", line(sku, shop, 4))
	b.requireOrderBal(t, sku, shop, orderBal{OnHand: 3}, "second confirmed")
	c, err = b.cancelOrder("ORD-CONF2", "cancel-2", "out_of_stock", oq(sku, shop, 2))
	order = mustChange(t, "cancel 2", c, err)
	b.requireLine(t, order, sku, lineCounts{Cancelled: 2}, "second cancelled 2")
	b.requireOrderBal(t, sku, shop, orderBal{OnHand: 5}, "second cancelled 2")
	c, err = b.fulfil("ORD-CONF2", "ship-2")
	order = mustChange(t, "fulfil the rest", c, err)
	b.requireLine(t, order, sku, lineCounts{Fulfilled: 2, Cancelled: 2}, "second shipped")
	b.requireOrderBal(t, sku, shop, orderBal{OnHand: 5}, "second shipped")

	b.refusedChange(t, "fulfil with nothing left", domain.CodeInvalidInput, func() (domain.OrderChange, error) {
		return b.fulfil("ORD-CONF", "ship-3")
	})
	b.refusedChange(t, "cancel with nothing left", domain.CodeInvalidInput, func() (domain.OrderChange, error) {
		return b.cancelOrder("ORD-CONF", "cancel-3", "other")
	})

	// Sold out, a shopper waits for 2: a cancel of 2 puts them back on hand
	// and offers them in the same call.
	b.sell(t, "cart-conf3", "ORD-CONF3", line(sku, shop, 5))
	b.requireOrderBal(t, sku, shop, orderBal{}, "sold out")
	waiter := b.mustJoin(t, "w-conf", "k", sku, shop, 2)
	c, err = b.cancelOrder("ORD-CONF3", "cancel-4", "customer_request", oq(sku, shop, 2))
	mustChange(t, "cancel 2 while one waits", c, err)
	b.requireOffered(t, shop, waiter)
	b.requireOrderBal(t, sku, shop, orderBal{OnHand: 2, Reserved: 2}, "cancelled 2, offered")
	b.requireInvariants(t)
}

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
