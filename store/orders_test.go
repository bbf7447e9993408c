package store_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
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
