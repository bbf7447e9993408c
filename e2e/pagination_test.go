package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
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

// TestReconciliationIsBounded: the admin reconciliation query answers at most
// first issues (default 100, 1..1000), in (SKU, location) order.
func TestReconciliationIsBounded(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	for _, sku := range []string{"RA", "RB", "RC"} {
		ts.seed(sku, 5)
	}
	// Three balances that disagree with their ledger.
	if _, err := ts.db.Exec(t.Context(), `UPDATE balances SET on_hand = on_hand + 1`); err != nil {
		t.Fatal(err)
	}
	const q = `query($first: Int) { reconciliation(first: $first) { sku } }`
	var issues []struct{ SKU string }
	ts.mustData(ts.gql(ts.admin, `{ reconciliation { sku } }`, nil), "reconciliation", &issues)
	if len(issues) != 3 {
		t.Fatalf("default: %d issues, want 3", len(issues))
	}
	ts.mustData(ts.gql(ts.admin, q, map[string]any{"first": 2}), "reconciliation", &issues)
	if len(issues) != 2 || issues[0].SKU != "RA" || issues[1].SKU != "RB" {
		t.Fatalf("first 2: %+v", issues)
	}
	for _, bad := range []int{0, 1001} {
		if r := ts.gql(ts.admin, q, map[string]any{"first": bad}); r.errorCode() != "BAD_REQUEST" {
			t.Errorf("first %d: %+v, want BAD_REQUEST", bad, r)
		}
	}
}

// TestLocationsAreBounded: there are at most 1,000 locations (every SKU's
// balances and every sourced reserve are per location), exactly, however
// many admins create them at once.
func TestLocationsAreBounded(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	if _, err := ts.db.Exec(t.Context(), `INSERT INTO locations (code, name) SELECT 'L' || i, 'Location ' || i FROM generate_series(1, 990) i`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	for i := range 30 {
		wg.Go(func() {
			r, err := gqlTo(ts.url, ts.admin, `mutation($c: String!) { createLocation(input: {code: $c, name: "New"}) { location { code } userErrors { code message } } }`,
				map[string]any{"c": fmt.Sprintf("NEW-%d", i)})
			if err != nil {
				t.Error(err)
				return
			}
			var p struct {
				UserErrors []struct{ Code, Message string }
			}
			if err := json.Unmarshal(r.Data["createLocation"], &p); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if len(p.UserErrors) == 0 {
				codes[""]++
			} else {
				codes[p.UserErrors[0].Code]++
			}
		})
	}
	wg.Wait()
	if codes[""] != 10 || codes["LIMIT_EXCEEDED"] != 20 {
		t.Fatalf("30 creates with room for 10: %v", codes)
	}
	if n := ts.count("SELECT count(*) FROM locations"); n != 1000 {
		t.Fatalf("%d locations, want 1000", n)
	}
	var p map[string]any
	ts.mustData(ts.gql(ts.admin, `mutation { createLocation(input: {code: "L1", name: "Again"}) { userErrors { code } } }`, nil), "createLocation", &p)
	if fmt.Sprint(p["userErrors"]) != "[map[code:ALREADY_EXISTS]]" {
		t.Fatalf("an existing code at the limit: %v", p)
	}
}
