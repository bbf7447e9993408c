package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"inventory/domain"
)

// availabilityFixture: three locations, a SKU stocked at all of them (with
// holds and pre-order supply), a SKU stocked at one, and a SKU never stocked.
//
//	HEADPHONES  BER(prio 1) 10/2 pend 7 pre 2   AMS(prio 2) 5/0 pend 1 pre 3   ZRH(prio 3) 8/8
//	CABLE       AMS 4
//	EMPTY       (no balances)
func availabilityFixture(t *testing.T) *testBundle {
	t.Helper()
	b := setup(t)
	mustLocation(t, b, "AMS", 2)
	mustLocation(t, b, "ZRH", 3)
	mustLocation(t, b, "BER", 1)
	mustSKU(t, b, "HEADPHONES", domain.KindQuantity)
	mustSKU(t, b, "CABLE", domain.KindQuantity)
	mustSKU(t, b, "EMPTY", domain.KindQuantity)
	mustReceive(t, b, "HEADPHONES", "AMS", 5)
	mustReceive(t, b, "HEADPHONES", "BER", 10)
	mustReceive(t, b, "HEADPHONES", "ZRH", 8)
	mustReceive(t, b, "CABLE", "AMS", 4)
	setReserved(t, b, "HEADPHONES", "BER", 2)
	setReserved(t, b, "HEADPHONES", "ZRH", 8)
	// Expected supply, and units already pre-ordered against it by a held
	// reservation line.
	for _, p := range []struct {
		loc                 string
		pending, preordered int
	}{{"BER", 7, 2}, {"AMS", 3, 1}} {
		if _, err := b.Store.PreorderSet(b.Ctx, domain.SetPreorderInput{SKU: "HEADPHONES", Location: p.loc, PendingSupply: p.pending}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Pool.Exec(b.Ctx, `
			WITH r AS (
				INSERT INTO reservations (checkout_id, request_key, fingerprint, expires_at)
				VALUES ('test-fake', 'preorder@' || $1, '\x00', now() + interval '1 day') RETURNING id
			), line AS (
				INSERT INTO reservation_lines (reservation_id, line_no, sku_id, location_id, quantity, preorder_quantity)
				SELECT r.id, 0, (SELECT id FROM skus WHERE code = 'HEADPHONES'), (SELECT id FROM locations WHERE code = $1), $2, $2 FROM r
			), u AS (
				UPDATE balances SET preordered = $2
				WHERE sku_id = (SELECT id FROM skus WHERE code = 'HEADPHONES')
				  AND location_id = (SELECT id FROM locations WHERE code = $1)
				RETURNING sku_id, location_id)
			INSERT INTO stock_movements (sku_id, location_id, preordered_delta, cause, actor)
			SELECT sku_id, location_id, $2, 'reserved', 'test' FROM u`, p.loc, p.preordered); err != nil {
			t.Fatal(err)
		}
	}
	b.RequireReconciled(t)
	return b
}

type wantBalance struct {
	loc                                   string
	onHand, reserved, pending, preordered int
}

func requireAvailability(t *testing.T, a *domain.Availability, sku string, want []wantBalance) {
	t.Helper()
	if a == nil {
		t.Fatalf("%s: got nil availability", sku)
	}
	if a.SKU != sku {
		t.Fatalf("availability for %q, want %q", a.SKU, sku)
	}
	if a.Locations == nil {
		t.Fatalf("%s: Locations is nil, want a non-nil slice", sku)
	}
	if len(a.Locations) != len(want) {
		t.Fatalf("%s: %d locations %+v, want %d", sku, len(a.Locations), a.Locations, len(want))
	}
	for i, w := range want {
		l := a.Locations[i]
		if l.SKU != sku || l.Location != w.loc || l.OnHand != w.onHand || l.Reserved != w.reserved ||
			l.PendingSupply != w.pending || l.Preordered != w.preordered || l.UpdatedAt.IsZero() {
			t.Fatalf("%s location %d = %+v, want %+v", sku, i, l, w)
		}
	}
}

func requireSums(t *testing.T, a *domain.Availability, onHand, reserved, available, preorder int) {
	t.Helper()
	if a.OnHand() != onHand || a.Reserved() != reserved || a.Available() != available || a.PreorderAvailable() != preorder {
		t.Fatalf("%s sums: on hand %d reserved %d available %d preorder %d; want %d %d %d %d", a.SKU,
			a.OnHand(), a.Reserved(), a.Available(), a.PreorderAvailable(), onHand, reserved, available, preorder)
	}
}

var (
	headphonesAll = []wantBalance{{"BER", 10, 2, 7, 2}, {"AMS", 5, 0, 3, 1}, {"ZRH", 8, 8, 0, 0}}
	cableAll      = []wantBalance{{"AMS", 4, 0, 0, 0}}
)

func TestAvailabilityList(t *testing.T) {
	t.Parallel()
	b := availabilityFixture(t)

	got, err := b.Store.AvailabilityList(b.Ctx, domain.AvailabilityQuery{
		SKUs: []string{"CABLE", "NOPE", "HEADPHONES", "EMPTY", "CABLE"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("want 5 answers, got %d", len(got))
	}
	requireAvailability(t, got[0], "CABLE", cableAll)
	requireSums(t, got[0], 4, 0, 4, 0)
	if got[1] != nil {
		t.Fatalf("unknown SKU: want nil, got %+v", got[1])
	}
	requireAvailability(t, got[2], "HEADPHONES", headphonesAll)
	// Available 8+5+0; pre-order (7-2)+(3-1)+0.
	requireSums(t, got[2], 23, 10, 13, 7)
	requireAvailability(t, got[3], "EMPTY", nil)
	requireSums(t, got[3], 0, 0, 0, 0)
	requireAvailability(t, got[4], "CABLE", cableAll)
	if got[0] == got[4] {
		t.Fatal("a duplicate SKU shares its answer's pointer with the first")
	}

	// Empty query: empty answer.
	if got, err := b.Store.AvailabilityList(b.Ctx, domain.AvailabilityQuery{}); err != nil || len(got) != 0 {
		t.Fatalf("empty query: %+v, %v", got, err)
	}
}

func TestAvailabilityListLocationFilter(t *testing.T) {
	t.Parallel()
	b := availabilityFixture(t)

	got, err := b.Store.AvailabilityList(b.Ctx, domain.AvailabilityQuery{
		SKUs:      []string{"HEADPHONES", "CABLE", "EMPTY", "NOPE"},
		Locations: []string{"ZRH", "AMS"}, // filter order does not change sourcing order
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("want 4 answers, got %d", len(got))
	}
	requireAvailability(t, got[0], "HEADPHONES", []wantBalance{{"AMS", 5, 0, 3, 1}, {"ZRH", 8, 8, 0, 0}})
	requireSums(t, got[0], 13, 8, 5, 2)
	requireAvailability(t, got[1], "CABLE", cableAll)
	requireSums(t, got[1], 4, 0, 4, 0)
	requireAvailability(t, got[2], "EMPTY", nil)
	if got[3] != nil {
		t.Fatalf("unknown SKU: want nil, got %+v", got[3])
	}

	// A SKU stocked only outside the filter is known, with nothing in it.
	got, err = b.Store.AvailabilityList(b.Ctx, domain.AvailabilityQuery{SKUs: []string{"CABLE", "HEADPHONES"}, Locations: []string{"BER"}})
	if err != nil {
		t.Fatal(err)
	}
	requireAvailability(t, got[0], "CABLE", nil)
	requireSums(t, got[0], 0, 0, 0, 0)
	requireAvailability(t, got[1], "HEADPHONES", []wantBalance{{"BER", 10, 2, 7, 2}})
	requireSums(t, got[1], 10, 2, 8, 5)

	// A location the server does not know is a malformed request.
	for _, locs := range [][]string{{"NOWHERE"}, {"AMS", "NOWHERE"}, {"NOWHERE", "ZRH"}} {
		got, err := b.Store.AvailabilityList(b.Ctx, domain.AvailabilityQuery{SKUs: []string{"HEADPHONES"}, Locations: locs})
		var le *domain.LimitError
		if !errors.As(err, &le) {
			t.Fatalf("filter %v: want a *domain.LimitError, got %v (%+v)", locs, err, got)
		}
		if !strings.Contains(le.Message, "NOWHERE") {
			t.Fatalf("filter %v: error %q does not name the unknown location", locs, le.Message)
		}
	}
}

func TestAvailabilityListLimits(t *testing.T) {
	t.Parallel()
	b := availabilityFixture(t)

	skus := make([]string, domain.MaxAvailabilitySKUs+1)
	for i := range skus {
		skus[i] = fmt.Sprintf("UNKNOWN-%d", i)
	}
	skus[0], skus[domain.MaxAvailabilitySKUs-1] = "HEADPHONES", "CABLE"

	// 500 is the documented maximum and is answered in full.
	got, err := b.Store.AvailabilityList(b.Ctx, domain.AvailabilityQuery{SKUs: skus[:domain.MaxAvailabilitySKUs]})
	if err != nil {
		t.Fatalf("500 SKUs refused: %v", err)
	}
	if len(got) != domain.MaxAvailabilitySKUs {
		t.Fatalf("500 SKUs: %d answers", len(got))
	}
	requireAvailability(t, got[0], "HEADPHONES", headphonesAll)
	requireAvailability(t, got[domain.MaxAvailabilitySKUs-1], "CABLE", cableAll)
	for i := 1; i < domain.MaxAvailabilitySKUs-1; i++ {
		if got[i] != nil {
			t.Fatalf("answer %d for unknown %q: %+v", i, skus[i], got[i])
		}
	}

	requireLimit := func(name string, q domain.AvailabilityQuery) {
		t.Helper()
		got, err := b.Store.AvailabilityList(b.Ctx, q)
		var le *domain.LimitError
		if !errors.As(err, &le) {
			t.Fatalf("%s: want a *domain.LimitError, got %v (%d answers)", name, err, len(got))
		}
	}
	requireLimit("501 SKUs", domain.AvailabilityQuery{SKUs: skus})
	locs := make([]string, domain.MaxAvailabilityFilter+1)
	for i := range locs {
		locs[i] = "AMS"
	}
	requireLimit("101 filter locations", domain.AvailabilityQuery{SKUs: []string{"HEADPHONES"}, Locations: locs})
	requireLimit("129-character SKU", domain.AvailabilityQuery{SKUs: []string{strings.Repeat("S", 129)}})
	requireLimit("empty SKU", domain.AvailabilityQuery{SKUs: []string{"HEADPHONES", ""}})
	requireLimit("empty location", domain.AvailabilityQuery{SKUs: []string{"HEADPHONES"}, Locations: []string{""}})

	// 100 filter entries are accepted.
	got, err = b.Store.AvailabilityList(b.Ctx, domain.AvailabilityQuery{SKUs: []string{"HEADPHONES"}, Locations: locs[:domain.MaxAvailabilityFilter]})
	if err != nil {
		t.Fatalf("100 filter locations refused: %v", err)
	}
	requireAvailability(t, got[0], "HEADPHONES", []wantBalance{{"AMS", 5, 0, 3, 1}})
}

// TestAvailabilityListDuplicates: a SKU asked for many times is read once
// and answered once per request, in order, each entry its own copy: 500
// copies of HEADPHONES with CABLE and an unknown SKU between them.
func TestAvailabilityListDuplicates(t *testing.T) {
	t.Parallel()
	b := availabilityFixture(t)
	skus := make([]string, domain.MaxAvailabilitySKUs)
	for i := range skus {
		skus[i] = "HEADPHONES"
	}
	skus[1], skus[2], skus[499] = "CABLE", "NOPE", "CABLE"
	got, err := b.Store.AvailabilityList(b.Ctx, domain.AvailabilityQuery{SKUs: skus})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(skus) {
		t.Fatalf("%d answers for %d SKUs", len(got), len(skus))
	}
	for i, sku := range skus {
		switch sku {
		case "NOPE":
			if got[i] != nil {
				t.Fatalf("answer %d for an unknown SKU: %+v", i, got[i])
			}
		case "CABLE":
			requireAvailability(t, got[i], "CABLE", cableAll)
		default:
			requireAvailability(t, got[i], "HEADPHONES", headphonesAll)
			requireSums(t, got[i], 23, 10, 13, 7)
		}
	}
	if got[0] == got[3] || &got[0].Locations[0] == &got[3].Locations[0] {
		t.Fatal("duplicate answers alias each other")
	}
}
