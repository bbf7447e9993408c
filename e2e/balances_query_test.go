package e2e

import "testing"

// TestBalancesQuery: the admin-only balances query pages through every
// balance in SKU, location order and reports the newest event seq, which the
// dashboard subscribes from.
func TestBalancesQuery(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("B-SKU", 3)
	ts.seed("A-SKU", 5)
	const q = `query($after: String) { balances(first: 1, after: $after) { balances { sku location onHand available } next seq } }`
	type page struct {
		Balances []struct {
			SKU      string `json:"sku"`
			Location string `json:"location"`
			OnHand   int    `json:"onHand"`
		} `json:"balances"`
		Next *string `json:"next"`
		Seq  int64   `json:"seq"`
	}
	var got []string
	var after any
	for range 5 {
		var p page
		ts.mustData(ts.gql(ts.admin, q, map[string]any{"after": after}), "balances", &p)
		for _, b := range p.Balances {
			got = append(got, b.SKU+"@"+b.Location)
		}
		if p.Seq < 0 {
			t.Fatalf("seq %d", p.Seq)
		}
		if p.Next == nil {
			break
		}
		after = *p.Next
	}
	if len(got) != 2 || got[0] != "A-SKU@AMS" || got[1] != "B-SKU@AMS" {
		t.Fatalf("balances: %v", got)
	}
	if r := ts.gql(ts.service, q, nil); r.errorCode() != "FORBIDDEN" {
		t.Fatalf("service: %+v", r.Errors)
	}
	if r := ts.gql("", q, nil); r.errorCode() != "UNAUTHENTICATED" {
		t.Fatalf("anonymous: %+v", r.Errors)
	}
}
