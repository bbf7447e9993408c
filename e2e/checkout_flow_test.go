package e2e

import (
	"encoding/json"
	"testing"
)

// TestCheckoutFlow walks the documented flow over HTTP with the right tokens:
// the backend mints a checkout token, the SPA reserves and extends, the
// backend confirms after payment, the SPA reads its order. Along the way every
// reservation operation is tried by callers who must be refused.
func TestCheckoutFlow(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 5)
	token := func(checkout string) string {
		var tok struct{ Token string }
		ts.mustData(ts.gql(ts.service, `mutation($c: String!) { issueCheckoutToken(checkoutId: $c) { token } }`, map[string]any{"c": checkout}), "issueCheckoutToken", &tok)
		return tok.Token
	}
	cartA, cartB := token("cart-A"), token("cart-B")

	// Reserve: own checkout only; anonymous is UNAUTHENTICATED.
	if r := ts.gql(cartA, reserveMutation, reserveVars("cart-B", "k", "HP", 1)); r.errorCode() != "FORBIDDEN" {
		t.Fatalf("reserve for another checkout: %+v", r)
	}
	if r := ts.gql("", reserveMutation, reserveVars("cart-A", "k", "HP", 1)); r.errorCode() != "UNAUTHENTICATED" {
		t.Fatalf("anonymous reserve: %+v", r)
	}
	if n := ts.count(`SELECT count(*) FROM reservations`); n != 0 {
		t.Fatalf("refused reserves wrote %d reservations", n)
	}
	res, err := decodeReserve(ts.gql(cartA, reserveMutation, reserveVars("cart-A", "k", "HP", 2)))
	if err != nil || res.Reservation == nil {
		t.Fatalf("reserve: %+v %v", res, err)
	}
	id := res.Reservation.ID
	vars := map[string]any{"id": id}

	// Reads: owner, service and admin see it; another checkout sees null.
	const read = `query($id: ID!) { reservation(id: $id) { id status expiresAt lines { sku quantity } } }`
	for _, who := range []string{cartA, ts.service, ts.admin} {
		var got *struct{ ID string }
		ts.mustData(ts.gql(who, read, vars), "reservation", &got)
		if got == nil || got.ID != id {
			t.Fatalf("reservation read: %+v", got)
		}
	}
	var none *struct{ ID string }
	ts.mustData(ts.gql(cartB, read, vars), "reservation", &none)
	if none != nil {
		t.Fatalf("another checkout read %+v", none)
	}
	if r := ts.gql(cartB, `{ checkoutReservations(checkoutId: "cart-A") { id } }`, nil); r.errorCode() != "FORBIDDEN" {
		t.Fatalf("list another checkout: %+v", r)
	}
	var list []struct{ ID string }
	ts.mustData(ts.gql(cartA, `{ checkoutReservations(checkoutId: "cart-A") { id } }`, nil), "checkoutReservations", &list)
	if len(list) != 1 || list[0].ID != id {
		t.Fatalf("list: %+v", list)
	}

	// No checkout token confirms, its own hold or another's: FORBIDDEN.
	const confirmX = `mutation($id: ID!) { confirmReservation(input: {id: $id, orderRef: "X"}) { reservation { id } userErrors { code } } }`
	for _, who := range []string{cartA, cartB} {
		if r := ts.gql(who, confirmX, vars); r.errorCode() != "FORBIDDEN" {
			t.Fatalf("confirm with a checkout token: %+v", r)
		}
	}
	if r := ts.gql("", confirmX, vars); r.errorCode() != "UNAUTHENTICATED" {
		t.Fatalf("confirm anonymously: %+v", r)
	}
	// Another checkout cannot extend or release it: NOT_FOUND.
	for _, m := range []string{
		`mutation($id: ID!) { extendReservation(input: {id: $id, ttlSeconds: 600}) { reservation { id } userErrors { code } } }`,
		`mutation($id: ID!) { releaseReservation(input: {id: $id}) { reservation { id } userErrors { code } } }`,
	} {
		r := ts.gql(cartB, m, vars)
		var p struct {
			Reservation *struct{ ID string }
			UserErrors  []struct{ Code string }
		}
		for _, v := range r.Data {
			_ = json.Unmarshal(v, &p)
		}
		if len(r.Errors) > 0 || p.Reservation != nil || len(p.UserErrors) != 1 || p.UserErrors[0].Code != "NOT_FOUND" {
			t.Fatalf("%s as another checkout: %+v %+v", m, r.Errors, p)
		}
		if r := ts.gql("", m, vars); r.errorCode() != "UNAUTHENTICATED" {
			t.Fatalf("%s anonymously: %+v", m, r)
		}
	}

	// The owner extends; the backend confirms with what the buyer saw.
	var ext struct {
		Reservation struct{ ExpiresAt string }
		UserErrors  []any
	}
	ts.mustData(ts.gql(cartA, `mutation($id: ID!) { extendReservation(input: {id: $id, ttlSeconds: 1200}) { reservation { expiresAt } userErrors { code } } }`, vars), "extendReservation", &ext)
	if len(ext.UserErrors) != 0 || ext.Reservation.ExpiresAt == "" {
		t.Fatalf("extend: %+v", ext)
	}
	var conf struct {
		Reservation struct{ Status string }
		Order       struct {
			Ref   string
			Lines []struct {
				SKU       string `json:"sku"`
				Quantity  int
				Title     string
				UnitPrice string
				Currency  string
				Codes     []string
			}
		}
		UserErrors []any
	}
	ts.mustData(ts.gql(ts.service, `mutation($id: ID!) { confirmReservation(input: {id: $id, orderRef: "ORD-1",
		lines: [{sku: "HP", title: "Headphones", unitPrice: "49.90", currency: "EUR"}]}) {
		reservation { status } order { ref lines { sku quantity title unitPrice currency codes } } userErrors { code } } }`, vars), "confirmReservation", &conf)
	if conf.Reservation.Status != "CONFIRMED" || conf.Order.Ref != "ORD-1" || len(conf.Order.Lines) != 1 ||
		conf.Order.Lines[0].Title != "Headphones" || conf.Order.Lines[0].Quantity != 2 || conf.Order.Lines[0].Codes == nil {
		t.Fatalf("confirm: %+v", conf)
	}
	if on := ts.count(`SELECT on_hand FROM balances`); on != 3 {
		t.Fatalf("on_hand %d after selling 2 of 5", on)
	}
	var order *struct{ Ref string }
	ts.mustData(ts.gql(cartA, `{ order(ref: "ORD-1") { ref } }`, nil), "order", &order)
	if order == nil || order.Ref != "ORD-1" {
		t.Fatalf("owner order read: %+v", order)
	}
	ts.mustData(ts.gql(cartB, `{ order(ref: "ORD-1") { ref } }`, nil), "order", &order)
	if order != nil {
		t.Fatalf("another checkout read the order: %+v", order)
	}

	// Health is the admin's.
	for who, want := range map[string]string{cartA: "FORBIDDEN", ts.service: "FORBIDDEN", "": "UNAUTHENTICATED", ts.admin: ""} {
		r := ts.gql(who, `{ inventoryHealth { heldReservations overdueHolds heldByAge { label count } allocationFailureRate lastSweepReleased } }`, nil)
		if r.errorCode() != want {
			t.Fatalf("inventoryHealth: got %q want %q (%+v)", r.errorCode(), want, r.Errors)
		}
	}
}
