package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The GraphQL documents of the after-the-sale story: the order with the
// counts fulfillOrder and cancelOrder move, and balances with committed.
const (
	atsOrderFields = `order { ref lines { sku location quantity committed fulfilled cancelled } }
		replayed userErrors { code message field line sku available }`
	atsFulfill = `mutation($in: FulfillOrderInput!) { fulfillOrder(input: $in) { ` + atsOrderFields + ` } }`
	atsCancel  = `mutation($in: CancelOrderInput!) { cancelOrder(input: $in) { ` + atsOrderFields + ` } }`
	atsLevels  = `mutation($in: SetStockLevelsInput!) { setStockLevels(input: $in) {
		replayed applied unchanged failed balances { sku location onHand reserved committed available }
		userErrors { code message field line sku available } } }`
	atsStream = `subscription($after: Int64, $skus: [String!]) { stockChanged(after: $after, skus: $skus) {
		seq sku location cause onHand reserved committed available } }`
)

// atsBalance is a Balance as the API shows it.
type atsBalance struct {
	SKU       string `json:"sku"`
	Location  string `json:"location"`
	OnHand    int    `json:"onHand"`
	Reserved  int    `json:"reserved"`
	Committed int    `json:"committed"`
	Available int    `json:"available"`
}

// atsUserError is a UserError with every field.
type atsUserError struct {
	Code      string   `json:"code"`
	Message   string   `json:"message"`
	Field     []string `json:"field"`
	Line      *int     `json:"line"`
	SKU       *string  `json:"sku"`
	Available *int     `json:"available"`
}

// atsOrderLine is an OrderLine with what was shipped and given back.
type atsOrderLine struct {
	SKU       string `json:"sku"`
	Location  string `json:"location"`
	Quantity  int    `json:"quantity"`
	Committed int    `json:"committed"`
	Fulfilled int    `json:"fulfilled"`
	Cancelled int    `json:"cancelled"`
}

// atsOrderPayload is an OrderPayload.
type atsOrderPayload struct {
	Order *struct {
		Ref   string         `json:"ref"`
		Lines []atsOrderLine `json:"lines"`
	} `json:"order"`
	Replayed   bool           `json:"replayed"`
	UserErrors []atsUserError `json:"userErrors"`
}

// code is the first userError's code, or "".
func (p atsOrderPayload) code() string {
	if len(p.UserErrors) == 0 {
		return ""
	}
	return p.UserErrors[0].Code
}

// line is the order's only line; it fails the test unless there is exactly one.
func (p atsOrderPayload) line(t *testing.T) atsOrderLine {
	t.Helper()
	if p.Order == nil || len(p.Order.Lines) != 1 {
		t.Fatalf("want an order with one line: %+v", p)
	}
	return p.Order.Lines[0]
}

// atsOrderCall sends fulfillOrder or cancelOrder as bearer and decodes the
// payload; r carries any top-level errors (an auth refusal).
func (ts *testServer) atsOrderCall(bearer, doc, field string, in map[string]any) (atsOrderPayload, gqlResponse) {
	ts.t.Helper()
	r := ts.gql(bearer, doc, map[string]any{"in": in})
	var p atsOrderPayload
	if raw := r.Data[field]; len(r.Errors) == 0 && len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &p); err != nil {
			ts.t.Fatalf("decode %s: %v (%s)", field, err, raw)
		}
	}
	return p, r
}

// atsFulfillOK ships as the service key and fails the test on any error.
func (ts *testServer) atsFulfillOK(in map[string]any) atsOrderPayload {
	ts.t.Helper()
	p, r := ts.atsOrderCall(ts.service, atsFulfill, "fulfillOrder", in)
	if len(r.Errors) > 0 || len(p.UserErrors) > 0 || p.Order == nil {
		ts.t.Fatalf("fulfillOrder %v: %+v %+v", in, p, r.Errors)
	}
	return p
}

// atsCancelOK cancels as the service key and fails the test on any error.
func (ts *testServer) atsCancelOK(in map[string]any) atsOrderPayload {
	ts.t.Helper()
	p, r := ts.atsOrderCall(ts.service, atsCancel, "cancelOrder", in)
	if len(r.Errors) > 0 || len(p.UserErrors) > 0 || p.Order == nil {
		ts.t.Fatalf("cancelOrder %v: %+v %+v", in, p, r.Errors)
	}
	return p
}

// atsBalanceOf reads one balance through sku(code) (from the database:
// linearizable) and fails the test when there is none.
func (ts *testServer) atsBalanceOf(sku, location string) atsBalance {
	ts.t.Helper()
	var s *struct {
		Balances []atsBalance `json:"balances"`
	}
	ts.mustData(ts.gql(ts.admin, `query($c: String!) { sku(code: $c) { balances { sku location onHand reserved committed available } } }`,
		map[string]any{"c": sku}), "sku", &s)
	if s == nil {
		ts.t.Fatalf("no SKU %s", sku)
	}
	for _, b := range s.Balances {
		if b.Location == location {
			return b
		}
	}
	ts.t.Fatalf("no balance %s@%s in %+v", sku, location, s.Balances)
	return atsBalance{}
}

// atsRequireBalance fails unless the balance reads onHand/reserved/committed
// and available = onHand - reserved - committed.
func (ts *testServer) atsRequireBalance(what, sku, location string, onHand, reserved, committed int) {
	ts.t.Helper()
	got := ts.atsBalanceOf(sku, location)
	want := atsBalance{SKU: sku, Location: location, OnHand: onHand, Reserved: reserved, Committed: committed, Available: onHand - reserved - committed}
	if got != want {
		ts.t.Fatalf("%s: balance %+v, want %+v", what, got, want)
	}
}

// atsLevelsPayload is a SetStockLevelsPayload.
type atsLevelsPayload struct {
	Replayed   bool           `json:"replayed"`
	Applied    int            `json:"applied"`
	Unchanged  int            `json:"unchanged"`
	Failed     int            `json:"failed"`
	Balances   []atsBalance   `json:"balances"`
	UserErrors []atsUserError `json:"userErrors"`
}

// atsCount sends the WMS's physical count of one balance (admin).
func (ts *testServer) atsCount(reference, sku, location string, onHand int) atsLevelsPayload {
	ts.t.Helper()
	var p atsLevelsPayload
	ts.mustData(ts.gql(ts.admin, atsLevels, map[string]any{"in": map[string]any{"reference": reference,
		"levels": []any{map[string]any{"sku": sku, "location": location, "onHand": onHand}}}}), "setStockLevels", &p)
	return p
}

// atsHold reserves q units of sku at location for checkout as bearer and
// returns the hold's id.
func (ts *testServer) atsHold(bearer, checkout, key, sku, location string, q int) string {
	ts.t.Helper()
	p, err := decodeReserve(ts.gql(bearer, reserveMutation, map[string]any{"in": map[string]any{"checkoutId": checkout, "requestKey": key,
		"lines": []map[string]any{{"sku": sku, "location": location, "quantity": q}}}}))
	if err != nil || p.Reservation == nil || p.Reservation.Status != "HELD" || len(p.UserErrors) > 0 {
		ts.t.Fatalf("reserve %d %s@%s: %+v %v", q, sku, location, p, err)
	}
	return p.Reservation.ID
}

// atsConfirm confirms a hold as the service key (after payment) and returns
// the order's only line.
func (ts *testServer) atsConfirm(id, orderRef string) atsOrderLine {
	ts.t.Helper()
	var p struct {
		Reservation struct{ Status string }
		Order       *struct {
			Ref   string
			Lines []atsOrderLine
		}
		UserErrors []atsUserError
	}
	ts.mustData(ts.gql(ts.service, `mutation($id: ID!, $ref: String!) { confirmReservation(input: {id: $id, orderRef: $ref}) {
		reservation { status } order { ref lines { sku location quantity committed fulfilled cancelled } } userErrors { code message } } }`,
		map[string]any{"id": id, "ref": orderRef}), "confirmReservation", &p)
	if len(p.UserErrors) > 0 || p.Reservation.Status != "CONFIRMED" || p.Order == nil || p.Order.Ref != orderRef || len(p.Order.Lines) != 1 {
		ts.t.Fatalf("confirm %s as %s: %+v", id, orderRef, p)
	}
	return p.Order.Lines[0]
}

// atsOrderLineOf reads an order's only line through order(ref).
func (ts *testServer) atsOrderLineOf(ref string) atsOrderLine {
	ts.t.Helper()
	var o *struct{ Lines []atsOrderLine }
	ts.mustData(ts.gql(ts.service, `query($r: String!) { order(ref: $r) { lines { sku location quantity committed fulfilled cancelled } } }`,
		map[string]any{"r": ref}), "order", &o)
	if o == nil || len(o.Lines) != 1 {
		ts.t.Fatalf("order %s: %+v", ref, o)
	}
	return o.Lines[0]
}

// atsStreamEvent is a StockEvent with committed.
type atsStreamEvent struct {
	Seq       int64  `json:"seq"`
	SKU       string `json:"sku"`
	Location  string `json:"location"`
	Cause     string `json:"cause"`
	OnHand    int    `json:"onHand"`
	Reserved  int    `json:"reserved"`
	Committed int    `json:"committed"`
	Available int    `json:"available"`
}

// TestAfterTheSaleWarehouseStory walks issue 29 over HTTP on the real
// server. A warehouse location ships ON_SHIPMENT: a confirm moves the sold
// units from reserved to committed, they stay on hand until fulfillOrder
// ships them, and available = onHand - reserved - committed throughout. The
// WMS's physical count, which still sees the sold boots on the shelf, then
// no longer makes them sellable again (the oversell), and a count below
// what holds and unshipped orders need is refused. fulfillOrder and
// cancelOrder are the backend's (never a checkout token's), idempotent per
// (orderRef, reference), and refuse more than is open. A shop (ON_CONFIRM)
// sells off onHand at confirm, and cancelOrder puts the units back on it.
// The stock event stream tells each step, FULFILLED and CANCELLED included.
func TestAfterTheSaleWarehouseStory(t *testing.T) {
	t.Parallel()
	ts := setup(t)

	// A warehouse that ships on shipment, a shop that ships on confirm (the
	// default), and boots.
	var wh struct {
		Location *struct {
			Code        string `json:"code"`
			Fulfillment string `json:"fulfillment"`
		} `json:"location"`
		UserErrors []atsUserError `json:"userErrors"`
	}
	ts.mustData(ts.gql(ts.admin, `mutation { createLocation(input: {code: "WH", name: "Warehouse", priority: 1, fulfillment: ON_SHIPMENT}) {
		location { code fulfillment } userErrors { code message } } }`, nil), "createLocation", &wh)
	if len(wh.UserErrors) > 0 || wh.Location == nil || wh.Location.Fulfillment != "ON_SHIPMENT" {
		t.Fatalf("create the warehouse: %+v", wh)
	}
	shop := wh
	ts.mustData(ts.gql(ts.admin, `mutation { createLocation(input: {code: "SHOP", name: "Shop", priority: 2}) {
		location { code fulfillment } userErrors { code message } } }`, nil), "createLocation", &shop)
	if len(shop.UserErrors) > 0 || shop.Location == nil || shop.Location.Fulfillment != "ON_CONFIRM" {
		t.Fatalf("create the shop (default fulfillment): %+v", shop)
	}
	var locs []struct {
		Code        string `json:"code"`
		Fulfillment string `json:"fulfillment"`
	}
	ts.mustData(ts.gql("", `{ locations { code fulfillment } }`, nil), "locations", &locs)
	if len(locs) != 2 || locs[0].Code != "WH" || locs[0].Fulfillment != "ON_SHIPMENT" || locs[1].Code != "SHOP" || locs[1].Fulfillment != "ON_CONFIRM" {
		t.Fatalf("locations: %+v", locs)
	}
	var p map[string]any
	ts.mustData(ts.gql(ts.admin, `mutation { createSku(input: {code: "BOOT", name: "Boot", kind: QUANTITY}) { userErrors { code } } }`, nil), "createSku", &p)
	ts.mustData(ts.gql(ts.admin, `mutation { receiveStock(input: {sku: "BOOT", location: "WH", quantity: 10, reference: "DN-1"}) { userErrors { code } } }`, nil), "receiveStock", &p)
	ts.atsRequireBalance("after receiving 10", "BOOT", "WH", 10, 0, 0)

	// The shopper holds 3 with a checkout token; the backend confirms after
	// payment: the 3 are committed, still on hand, no longer for sale.
	cart1 := ts.checkoutToken("cart-1")
	hold := ts.atsHold(cart1, "cart-1", "k1", "BOOT", "WH", 3)
	ts.atsRequireBalance("after the hold", "BOOT", "WH", 10, 3, 0)
	if l := ts.atsConfirm(hold, "ORD-WH-1"); l != (atsOrderLine{SKU: "BOOT", Location: "WH", Quantity: 3, Committed: 3}) {
		t.Fatalf("confirmed order line: %+v", l)
	}
	ts.atsRequireBalance("after the confirm", "BOOT", "WH", 10, 0, 3)

	// The WMS still counts 10 on the shelf: the count changes nothing, and
	// the 3 sold boots do not become available again (the oversell of the
	// issue: before committed stock this made available 10).
	if c := ts.atsCount("WMS-0601-a", "BOOT", "WH", 10); c.Replayed || c.Applied != 0 || c.Unchanged != 1 || c.Failed != 0 || len(c.UserErrors) != 0 {
		t.Fatalf("count of 10: %+v", c)
	}
	ts.atsRequireBalance("after the count of 10", "BOOT", "WH", 10, 0, 3)
	// The storefront's availability (the in-memory copy, which follows the
	// event stream) says 7 too.
	waitUntil(t, 10*time.Second, "availability of BOOT at WH to be 7", func() bool {
		var a []struct {
			Available int `json:"available"`
			OnHand    int `json:"onHand"`
		}
		ts.mustData(ts.gql("", `{ availability(skus: ["BOOT"], locations: ["WH"]) { available onHand } }`, nil), "availability", &a)
		if len(a) != 1 {
			t.Fatalf("availability: %+v", a)
		}
		return a[0].Available == 7 && a[0].OnHand == 10
	})

	// A count below reserved + committed is refused and changes nothing; so
	// is an adjustment that would take onHand there.
	low := ts.atsCount("WMS-0601-b", "BOOT", "WH", 2)
	if low.Applied != 0 || low.Unchanged != 0 || low.Failed != 1 || len(low.Balances) != 0 || len(low.UserErrors) != 1 {
		t.Fatalf("count of 2: %+v", low)
	}
	if e := low.UserErrors[0]; e.Code != "BELOW_RESERVED" || e.Line == nil || *e.Line != 0 || e.SKU == nil || *e.SKU != "BOOT" ||
		e.Available == nil || *e.Available != 3 {
		t.Fatalf("count of 2 refused with %+v, want BELOW_RESERVED on line 0 with available (the lowest count) 3", e)
	}
	ts.atsRequireBalance("after the refused count of 2", "BOOT", "WH", 10, 0, 3)
	var adj struct {
		Balance    *atsBalance    `json:"balance"`
		UserErrors []atsUserError `json:"userErrors"`
	}
	ts.mustData(ts.gql(ts.admin, `mutation { adjustStock(input: {sku: "BOOT", location: "WH", delta: -8, reason: "cycle_count", reference: "sheet-1"}) {
		balance { onHand } userErrors { code available } } }`, nil), "adjustStock", &adj)
	if adj.Balance != nil || len(adj.UserErrors) != 1 || adj.UserErrors[0].Code != "BELOW_RESERVED" ||
		adj.UserErrors[0].Available == nil || *adj.UserErrors[0].Available != 7 {
		t.Fatalf("adjust by -8: %+v, want BELOW_RESERVED with 7 removable", adj)
	}
	ts.atsRequireBalance("after the refused adjustment", "BOOT", "WH", 10, 0, 3)

	// Shipping is the backend's word: a checkout token (even the buyer's
	// own) is FORBIDDEN, anonymous UNAUTHENTICATED; neither moves a unit.
	ship := map[string]any{"orderRef": "ORD-WH-1", "reference": "PARCEL-1",
		"lines": []any{map[string]any{"sku": "BOOT", "location": "WH", "quantity": 3}}}
	for who, want := range map[string]string{cart1: "FORBIDDEN", "": "UNAUTHENTICATED"} {
		if _, r := ts.atsOrderCall(who, atsFulfill, "fulfillOrder", ship); r.errorCode() != want {
			t.Fatalf("fulfillOrder as %q: %+v, want %s", who, r, want)
		}
		cancel := map[string]any{"orderRef": "ORD-WH-1", "reference": "CXL-X", "reason": "customer_request"}
		if _, r := ts.atsOrderCall(who, atsCancel, "cancelOrder", cancel); r.errorCode() != want {
			t.Fatalf("cancelOrder as %q: %+v, want %s", who, r, want)
		}
	}
	if n := ts.count(`SELECT count(*) FROM order_actions`); n != 0 {
		t.Fatalf("refused callers wrote %d order actions", n)
	}
	ts.atsRequireBalance("after the refused callers", "BOOT", "WH", 10, 0, 3)

	// More than the order has in hand is INVALID_INPUT, naming what could
	// be shipped, and changes nothing.
	tooMany := map[string]any{"orderRef": "ORD-WH-1", "reference": "PARCEL-0",
		"lines": []any{map[string]any{"sku": "BOOT", "location": "WH", "quantity": 4}}}
	if q, r := ts.atsOrderCall(ts.service, atsFulfill, "fulfillOrder", tooMany); len(r.Errors) > 0 || q.Order != nil || q.code() != "INVALID_INPUT" ||
		q.UserErrors[0].Available == nil || *q.UserErrors[0].Available != 3 {
		t.Fatalf("ship 4 of 3: %+v %+v", q, r.Errors)
	}
	ts.atsRequireBalance("after shipping too many was refused", "BOOT", "WH", 10, 0, 3)

	// The parcel leaves: committed and onHand fall together.
	shipped := ts.atsFulfillOK(ship)
	if shipped.Replayed || shipped.line(t) != (atsOrderLine{SKU: "BOOT", Location: "WH", Quantity: 3, Fulfilled: 3}) {
		t.Fatalf("fulfillOrder: %+v", shipped)
	}
	ts.atsRequireBalance("after shipping 3", "BOOT", "WH", 7, 0, 0)
	if l := ts.atsOrderLineOf("ORD-WH-1"); l != (atsOrderLine{SKU: "BOOT", Location: "WH", Quantity: 3, Fulfilled: 3}) {
		t.Fatalf("order after shipping: %+v", l)
	}
	ledger := ts.count(`SELECT count(*) FROM stock_movements`)

	// The same call again (a retry): replayed, nothing moves.
	again := ts.atsFulfillOK(ship)
	if !again.Replayed || again.line(t) != (atsOrderLine{SKU: "BOOT", Location: "WH", Quantity: 3, Fulfilled: 3}) {
		t.Fatalf("fulfillOrder again: %+v", again)
	}
	ts.atsRequireBalance("after the replayed shipment", "BOOT", "WH", 7, 0, 0)
	// The reference with another input, and a new shipment of an order with
	// nothing left in hand, are refused.
	if q, _ := ts.atsOrderCall(ts.service, atsFulfill, "fulfillOrder", map[string]any{"orderRef": "ORD-WH-1", "reference": "PARCEL-1"}); q.code() != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("PARCEL-1 for the whole order: %+v", q)
	}
	if q, _ := ts.atsOrderCall(ts.service, atsFulfill, "fulfillOrder", map[string]any{"orderRef": "ORD-WH-1", "reference": "PARCEL-2"}); q.code() != "INVALID_INPUT" {
		t.Fatalf("ship an order with nothing in hand: %+v", q)
	}
	if q, _ := ts.atsOrderCall(ts.service, atsFulfill, "fulfillOrder", map[string]any{"orderRef": "ORD-NOPE", "reference": "PARCEL-1"}); q.code() != "NOT_FOUND" {
		t.Fatalf("ship an unknown order: %+v", q)
	}
	if n := ts.count(`SELECT count(*) FROM stock_movements`); n != ledger {
		t.Fatalf("the replay and the refusals wrote %d ledger rows", n-ledger)
	}
	ts.atsRequireBalance("after the refusals", "BOOT", "WH", 7, 0, 0)
	// The WMS now counts 7: what it sees and what the server has agree.
	if c := ts.atsCount("WMS-0602", "BOOT", "WH", 7); c.Applied != 0 || c.Unchanged != 1 || c.Failed != 0 {
		t.Fatalf("count of 7 after the dispatch: %+v", c)
	}

	// At the shop (ON_CONFIRM) a confirm takes the units off onHand; the
	// order is cancelled and they go back on it.
	ts.mustData(ts.gql(ts.admin, `mutation { receiveStock(input: {sku: "BOOT", location: "SHOP", quantity: 5, reference: "DN-2"}) { userErrors { code } } }`, nil), "receiveStock", &p)
	if l := ts.atsConfirm(ts.atsHold(ts.service, "cart-2", "k1", "BOOT", "SHOP", 2), "ORD-SHOP-1"); l != (atsOrderLine{SKU: "BOOT", Location: "SHOP", Quantity: 2}) {
		t.Fatalf("shop order line: %+v", l)
	}
	ts.atsRequireBalance("after the shop sale", "BOOT", "SHOP", 3, 0, 0)
	cancelShop := map[string]any{"orderRef": "ORD-SHOP-1", "reference": "CXL-1", "reason": "customer_request"}
	if c := ts.atsCancelOK(cancelShop); c.Replayed || c.line(t) != (atsOrderLine{SKU: "BOOT", Location: "SHOP", Quantity: 2, Cancelled: 2}) {
		t.Fatalf("cancel the shop order: %+v", c)
	}
	ts.atsRequireBalance("after the shop cancel", "BOOT", "SHOP", 5, 0, 0)
	if c := ts.atsCancelOK(cancelShop); !c.Replayed || c.line(t).Cancelled != 2 {
		t.Fatalf("cancel the shop order again: %+v", c)
	}
	ts.atsRequireBalance("after the replayed shop cancel", "BOOT", "SHOP", 5, 0, 0)
	ts.atsRequireBalance("the warehouse, untouched by the shop", "BOOT", "WH", 7, 0, 0)

	// A second warehouse order: one unit is cancelled (committed falls, the
	// unit is for sale again, onHand stays: it never left), one ships.
	if l := ts.atsConfirm(ts.atsHold(ts.service, "cart-3", "k1", "BOOT", "WH", 2), "ORD-WH-2"); l.Committed != 2 {
		t.Fatalf("second warehouse order line: %+v", l)
	}
	ts.atsRequireBalance("after the second warehouse sale", "BOOT", "WH", 7, 0, 2)
	part := map[string]any{"orderRef": "ORD-WH-2", "reference": "CXL-1", "reason": "customer_request",
		"lines": []any{map[string]any{"sku": "BOOT", "location": "WH", "quantity": 1}}}
	if c := ts.atsCancelOK(part); c.line(t) != (atsOrderLine{SKU: "BOOT", Location: "WH", Quantity: 2, Committed: 1, Cancelled: 1}) {
		t.Fatalf("cancel 1 of the second warehouse order: %+v", c)
	}
	ts.atsRequireBalance("after cancelling 1 of 2", "BOOT", "WH", 7, 0, 1)
	if q, _ := ts.atsOrderCall(ts.service, atsCancel, "cancelOrder", map[string]any{"orderRef": "ORD-WH-2", "reference": "CXL-2", "reason": "other",
		"lines": []any{map[string]any{"sku": "BOOT", "location": "WH", "quantity": 2}}}); q.code() != "INVALID_INPUT" {
		t.Fatalf("cancel 2 of 1 open: %+v", q)
	}
	if s := ts.atsFulfillOK(map[string]any{"orderRef": "ORD-WH-2", "reference": "PARCEL-1"}); s.line(t) != (atsOrderLine{SKU: "BOOT", Location: "WH", Quantity: 2, Fulfilled: 1, Cancelled: 1}) {
		t.Fatalf("ship the rest of the second warehouse order: %+v", s)
	}
	ts.atsRequireBalance("after shipping the rest", "BOOT", "WH", 6, 0, 0)

	// The stream tells every change, in order, with the balance after it.
	sub := dialWS(t, ts.url, ts.admin, false)
	sub.ack()
	sub.subscribe("1", atsStream, map[string]any{"after": 0, "skus": []string{"BOOT"}})
	type ev struct {
		loc, cause                  string
		onHand, reserved, committed int
	}
	want := []ev{
		{"WH", "RECEIVED", 10, 0, 0},
		{"WH", "RESERVED", 10, 3, 0},
		{"WH", "CONFIRMED", 10, 0, 3},
		{"WH", "FULFILLED", 7, 0, 0},
		{"SHOP", "RECEIVED", 5, 0, 0},
		{"SHOP", "RESERVED", 5, 2, 0},
		{"SHOP", "CONFIRMED", 3, 0, 0},
		{"SHOP", "CANCELLED", 5, 0, 0},
		{"WH", "RESERVED", 7, 2, 0},
		{"WH", "CONFIRMED", 7, 0, 2},
		{"WH", "CANCELLED", 7, 0, 1},
		{"WH", "FULFILLED", 6, 0, 0},
	}
	var seen []string
	for i, w := range want {
		var e atsStreamEvent
		sub.data("stockChanged", &e, 10*time.Second)
		seen = append(seen, fmt.Sprintf("%s@%s %s %d/%d/%d", e.SKU, e.Location, e.Cause, e.OnHand, e.Reserved, e.Committed))
		if e.SKU != "BOOT" || e.Location != w.loc || e.Cause != w.cause || e.OnHand != w.onHand || e.Reserved != w.reserved ||
			e.Committed != w.committed || e.Available != w.onHand-w.reserved-w.committed {
			t.Fatalf("event %d: %+v, want %+v (stream so far:\n%s)", i, e, w, strings.Join(seen, "\n"))
		}
	}
	// The polling query has the same events and no others.
	var polled []atsStreamEvent
	ts.mustData(ts.gql(ts.admin, `{ stockEvents(after: 0, first: 100) { seq sku location cause onHand reserved committed available } }`, nil), "stockEvents", &polled)
	causes := map[string]int{}
	for _, e := range polled {
		causes[e.Location+" "+e.Cause]++
	}
	if len(polled) != len(want) || causes["WH FULFILLED"] != 2 || causes["WH CANCELLED"] != 1 || causes["SHOP CANCELLED"] != 1 {
		t.Fatalf("stockEvents: %d events %v, want %d", len(polled), causes, len(want))
	}

	// The ledger, the balances and the orders agree.
	if out := ts.cli("reconcile"); !strings.HasPrefix(out, "consistent") {
		t.Fatalf("reconcile: %s", out)
	}
}
