package main

import (
	"fmt"
	"slices"
	"testing"
)

// TestCheckoutReservationsPages: a checkout's reservations come newest first,
// first at a time, each page continuing after the last id of the one
// before, without skipping or repeating; the default page is 50, and bad
// page sizes or cursors are refused.
func TestCheckoutReservationsPages(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 100)
	var made []string
	for i := range 7 {
		p, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("cart-P", fmt.Sprintf("k%d", i), "HP", 1)))
		if err != nil || p.Reservation == nil {
			t.Fatalf("reserve %d: %+v %v", i, p, err)
		}
		made = append(made, p.Reservation.ID)
	}
	slices.Reverse(made) // newest first

	const q = `query($after: ID, $first: Int) { checkoutReservations(checkoutId: "cart-P", first: $first, after: $after) { id } }`
	var got []string
	vars := map[string]any{"first": 3}
	for pages := 0; ; pages++ {
		var page []struct{ ID string }
		ts.mustData(ts.gql(ts.service, q, vars), "checkoutReservations", &page)
		if len(page) == 0 {
			if pages != 3 {
				t.Fatalf("%d pages of 3 for 7 reservations", pages)
			}
			break
		}
		for _, r := range page {
			got = append(got, r.ID)
		}
		vars["after"] = page[len(page)-1].ID
	}
	if !slices.Equal(got, made) {
		t.Fatalf("pages gave %v, want %v", got, made)
	}

	var all []struct{ ID string }
	ts.mustData(ts.gql(ts.service, `{ checkoutReservations(checkoutId: "cart-P") { id } }`, nil), "checkoutReservations", &all)
	if len(all) != 7 {
		t.Fatalf("default page: %d reservations", len(all))
	}
	for _, bad := range []map[string]any{{"first": 0}, {"first": 101}, {"after": "not-an-id"}, {"after": "00000000-0000-0000-0000-000000000000"}} {
		if r := ts.gql(ts.service, q, bad); r.errorCode() != "BAD_REQUEST" {
			t.Errorf("%v: %+v, want BAD_REQUEST", bad, r)
		}
	}
}
