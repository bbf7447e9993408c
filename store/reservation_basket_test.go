package store_test

import (
	"fmt"
	"slices"
	"testing"

	"inventory/domain"
)

// basketSnapshot is everything a refused reserve must leave alone, plus the
// allocation failure record it may add.
type basketSnapshot struct {
	state                                       dbState
	reservations, lines, jobs, failures, orders int
}

func (b *testBundle) basketSnapshot(t *testing.T) basketSnapshot {
	t.Helper()
	return basketSnapshot{
		state:        b.state(t),
		reservations: b.sqlInt(t, `SELECT count(*) FROM reservations`),
		lines:        b.sqlInt(t, `SELECT count(*) FROM reservation_lines`),
		jobs:         b.sqlInt(t, `SELECT count(*) FROM river_job`),
		failures:     b.sqlInt(t, `SELECT count(*) FROM allocation_failures`),
		orders:       b.sqlInt(t, `SELECT count(*) FROM orders`),
	}
}

// requireRefusedCleanly fails unless nothing but newFailures allocation
// failure rows changed since before.
func (b *testBundle) requireRefusedCleanly(t *testing.T, before basketSnapshot, newFailures int, what string) {
	t.Helper()
	b.requireUnchanged(t, before.state, what)
	after := b.basketSnapshot(t)
	want := before
	want.state = after.state
	want.failures += newFailures
	if after != want {
		t.Fatalf("%s: reservations/lines/jobs/failures/orders went from %d/%d/%d/%d/%d to %d/%d/%d/%d/%d, want failures +%d only",
			what, before.reservations, before.lines, before.jobs, before.failures, before.orders,
			after.reservations, after.lines, after.jobs, after.failures, after.orders, newFailures)
	}
}

// A basket is all or nothing: when its last line cannot be had, the lines
// before it (already claimed, or not yet, depending on the lock order) hold
// nothing afterwards, and only the allocation failure is recorded.
func TestReservationBasketAllOrNothing(t *testing.T) {
	t.Parallel()
	// The claim order is (sku id, location id). "last claimed": the failing
	// line's SKU is created last, so lines 0 and 1 are claimed before it fails
	// and must be rolled back; "first claimed": it is created first.
	for _, tc := range []struct {
		name        string
		createOrder []string
	}{
		{"failing line claimed last", []string{"B0", "B1", "B2"}},
		{"failing line claimed first", []string{"B2", "B1", "B0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			for _, sku := range tc.createOrder {
				b.Stock(t, sku, "AMS", 10)
			}
			// Some stock is already held by another checkout: it must stay held.
			b.mustCreate(t, "cart-other", "k", 900, line("B0", "AMS", 1), line("B1", "AMS", 2), line("B2", "AMS", 6))
			before := b.basketSnapshot(t)

			_, _, err := b.create("cart-basket", "k", 900, line("B0", "AMS", 3), line("B1", "AMS", 3), line("B2", "AMS", 5))
			e := requireCode(t, err, domain.CodeOutOfStock)
			if e.Line == nil || *e.Line != 2 || e.SKU != "B2" || e.Available == nil || *e.Available != 4 {
				t.Fatalf("OUT_OF_STOCK: line %s sku %q available %s (%s)", optInt(e.Line), e.SKU, optInt(e.Available), e.Message)
			}
			if want := []string{"input", "lines", "2", "quantity"}; !slices.Equal(e.Field, want) {
				t.Fatalf("field %v, want %v", e.Field, want)
			}
			b.requireRefusedCleanly(t, before, 1, "refused basket")
			for sku, rsv := range map[string]int{"B0": 1, "B1": 2, "B2": 6} {
				if on, got := b.Balance(t, sku, "AMS"); on != 10 || got != rsv {
					t.Fatalf("%s: on_hand %d reserved %d, want 10 and %d", sku, on, got, rsv)
				}
			}
			if n := b.sqlInt(t, `SELECT count(*) FROM reservations WHERE checkout_id = 'cart-basket'`); n != 0 {
				t.Fatalf("%d reservation rows for the refused basket", n)
			}
			if n := b.sqlInt(t, `SELECT count(*) FROM allocation_failures a JOIN skus s ON s.id = a.sku_id
				WHERE a.checkout_id = 'cart-basket' AND s.code = 'B2'`); n != 1 {
				t.Fatalf("%d allocation failures naming B2 for cart-basket, want 1", n)
			}
			// The refusal left the key free: the same key with a basket that
			// fits now reserves.
			res := b.mustCreate(t, "cart-basket", "k", 900, line("B0", "AMS", 3), line("B1", "AMS", 3), line("B2", "AMS", 4))
			if len(res.Lines) != 3 {
				t.Fatalf("retry: %+v", res)
			}
			b.requireInvariants(t)
		})
	}
}

// Unknown SKUs and locations are refused naming their line, and nothing is
// written, not even an allocation failure.
func TestReservationBasketUnknownCodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "U0", "AMS", 10)
	b.Stock(t, "U1", "AMS", 10)
	before := b.basketSnapshot(t)

	_, _, err := b.create("cart-u", "k", 900, line("U0", "AMS", 1), line("U1", "AMS", 1), line("NOPE", "AMS", 1))
	e := requireCode(t, err, domain.CodeUnknownSKU)
	if e.Line == nil || *e.Line != 2 || e.SKU != "NOPE" {
		t.Fatalf("UNKNOWN_SKU: line %s sku %q", optInt(e.Line), e.SKU)
	}
	b.requireRefusedCleanly(t, before, 0, "unknown SKU")

	_, _, err = b.create("cart-u", "k", 900, line("U0", "AMS", 1), line("NOPE", "", 1))
	e = requireCode(t, err, domain.CodeUnknownSKU)
	if e.Line == nil || *e.Line != 1 {
		t.Fatalf("UNKNOWN_SKU (sourced line): line %s", optInt(e.Line))
	}
	b.requireRefusedCleanly(t, before, 0, "unknown SKU on a sourced line")

	_, _, err = b.create("cart-u", "k", 900, line("U0", "AMS", 1), line("U1", "NOWHERE", 1), line("U0", "", 1))
	e = requireCode(t, err, domain.CodeUnknownLocation)
	if e.Line == nil || *e.Line != 1 || e.SKU != "U1" {
		t.Fatalf("UNKNOWN_LOCATION: line %s sku %q", optInt(e.Line), e.SKU)
	}
	b.requireRefusedCleanly(t, before, 0, "unknown location")

	// A known location where the SKU has no balance is simply out of stock.
	mustLocation(t, b, "EMPTY", 0)
	before = b.basketSnapshot(t)
	_, _, err = b.create("cart-u", "k", 900, line("U0", "EMPTY", 1))
	e = requireCode(t, err, domain.CodeOutOfStock)
	if e.Line == nil || *e.Line != 0 || e.Available == nil || *e.Available != 0 {
		t.Fatalf("no balance: line %s available %s", optInt(e.Line), optInt(e.Available))
	}
	b.requireRefusedCleanly(t, before, 1, "no balance at the location")
	b.requireInvariants(t)
}

// Limits: at most 100 lines, a TTL of 1 s to 24 h, positive quantities. Bad
// input is refused before anything is written.
func TestReservationInputLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "LIM", "AMS", 1000)
	before := b.basketSnapshot(t)

	basket := func(n int) []domain.ReserveLine {
		lines := make([]domain.ReserveLine, n)
		for i := range lines {
			lines[i] = line("LIM", "AMS", 1)
		}
		return lines
	}
	for _, tc := range []struct {
		name  string
		lines []domain.ReserveLine
		ttl   int
		field []string
		line  *int
	}{
		{"101 lines", basket(101), 900, []string{"input", "lines"}, nil},
		{"no lines", nil, 900, []string{"input", "lines"}, nil},
		{"ttl 0", basket(1), 0, []string{"input", "ttlSeconds"}, nil},
		{"ttl 86401", basket(1), 86401, []string{"input", "ttlSeconds"}, nil},
		{"ttl negative", basket(1), -1, []string{"input", "ttlSeconds"}, nil},
		{"quantity 0", []domain.ReserveLine{line("LIM", "AMS", 1), line("LIM", "AMS", 0)}, 900, []string{"input", "lines", "1", "quantity"}, ptr(1)},
		{"quantity past maximum", []domain.ReserveLine{line("LIM", "", domain.MaxQuantity+1)}, 900, []string{"input", "lines", "0", "quantity"}, ptr(0)},
		{"empty sku", []domain.ReserveLine{line("", "AMS", 1)}, 900, []string{"input", "lines", "0", "sku"}, ptr(0)},
	} {
		_, _, err := b.create("cart-lim", "k-"+tc.name, tc.ttl, tc.lines...)
		e := requireCode(t, err, domain.CodeInvalidInput)
		if !slices.Equal(e.Field, tc.field) || optInt(e.Line) != optInt(tc.line) {
			t.Fatalf("%s: field %v line %s, want %v line %s (%s)", tc.name, e.Field, optInt(e.Line), tc.field, optInt(tc.line), e.Message)
		}
	}
	b.requireRefusedCleanly(t, before, 0, "invalid input")

	// The boundaries themselves are accepted.
	res := b.mustCreate(t, "cart-lim", "100-lines", 86400, basket(100)...)
	if len(res.Lines) != 100 {
		t.Fatalf("100 lines: %d reservation lines", len(res.Lines))
	}
	for i, l := range res.Lines {
		if l.InputLine != i || l.Quantity != 1 {
			t.Fatalf("100 lines: line %d is %+v", i, l)
		}
	}
	b.mustCreate(t, "cart-lim", "ttl-1", 1, basket(1)...)
	if on, rsv := b.Balance(t, "LIM", "AMS"); on != 1000 || rsv != 101 {
		t.Fatalf("on_hand %d reserved %d, want 1000 and 101", on, rsv)
	}
	b.requireInvariants(t)
}

// A line without a location takes stock from locations by ascending priority,
// then code, splitting across them when one is not enough, and is refused with
// the total available across locations when all together are not enough.
func TestReservationSourcing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "FAR", 5)
	mustLocation(t, b, "NEAR-B", 1)
	mustLocation(t, b, "NEAR-A", 1)
	mustLocation(t, b, "BEST", -3) // best priority, but nothing available
	mustLocation(t, b, "NONE", -9) // best of all, but no balance for the SKU
	b.Stock(t, "SRC", "FAR", 10)
	b.Stock(t, "SRC", "NEAR-B", 2)
	b.Stock(t, "SRC", "NEAR-A", 3)
	b.Stock(t, "SRC", "BEST", 4)
	b.Stock(t, "OTHER", "NONE", 50)
	b.mustCreate(t, "cart-best", "k", 900, line("SRC", "BEST", 4))

	type rl = domain.ReservationLine
	requireLines := func(what string, got []domain.ReservationLine, want []rl) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: lines %+v, want %+v", what, got, want)
		}
	}
	requireReserved := func(what string, want map[string]int) {
		t.Helper()
		for loc, rsv := range want {
			if _, got := b.Balance(t, "SRC", loc); got != rsv {
				t.Fatalf("%s: SRC@%s reserved %d, want %d", what, loc, got, rsv)
			}
		}
	}

	// One location is enough: the first by priority, then code.
	small := b.mustCreate(t, "cart-src", "small", 900, line("SRC", "", 2))
	requireLines("small", small.Lines, []rl{{InputLine: 0, SKU: "SRC", Location: "NEAR-A", Quantity: 2}})
	if _, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: small.ID, Reason: domain.ReasonOther}); err != nil {
		t.Fatal(err)
	}

	// Split across locations, as the second line of a basket.
	split := b.mustCreate(t, "cart-src", "split", 900, line("OTHER", "NONE", 1), line("SRC", "", 7))
	requireLines("split", split.Lines, []rl{
		{InputLine: 0, SKU: "OTHER", Location: "NONE", Quantity: 1},
		{InputLine: 1, SKU: "SRC", Location: "NEAR-A", Quantity: 3},
		{InputLine: 1, SKU: "SRC", Location: "NEAR-B", Quantity: 2},
		{InputLine: 1, SKU: "SRC", Location: "FAR", Quantity: 2},
	})
	requireReserved("split", map[string]int{"BEST": 4, "NEAR-A": 3, "NEAR-B": 2, "FAR": 2})
	// What is read back later is what the reserve answered.
	got, err := b.Store.ReservationGetByID(b.Ctx, domain.Scope{}, split.ID)
	if err != nil || got == nil {
		t.Fatalf("get: %v %v", got, err)
	}
	requireLines("split read back", got.Lines, split.Lines)

	// All together not enough: 8 left, all at FAR.
	before := b.basketSnapshot(t)
	_, _, err = b.create("cart-src", "too-many", 900, line("SRC", "", 9))
	e := requireCode(t, err, domain.CodeOutOfStock)
	if e.Line == nil || *e.Line != 0 || e.SKU != "SRC" || e.Available == nil || *e.Available != 8 {
		t.Fatalf("too many: line %s sku %q available %s", optInt(e.Line), e.SKU, optInt(e.Available))
	}
	b.requireRefusedCleanly(t, before, 1, "sourced line out of stock")

	// Released, 15 are available across NEAR-A, NEAR-B and FAR: 16 is one too many, 15 takes everything.
	if _, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: split.ID, Reason: domain.ReasonOther}); err != nil {
		t.Fatal(err)
	}
	_, _, err = b.create("cart-src", "sixteen", 900, line("SRC", "", 16))
	if e := requireCode(t, err, domain.CodeOutOfStock); e.Available == nil || *e.Available != 15 {
		t.Fatalf("sixteen: available %s", optInt(e.Available))
	}
	all := b.mustCreate(t, "cart-src", "fifteen", 900, line("SRC", "", 15))
	requireLines("fifteen", all.Lines, []rl{
		{InputLine: 0, SKU: "SRC", Location: "NEAR-A", Quantity: 3},
		{InputLine: 0, SKU: "SRC", Location: "NEAR-B", Quantity: 2},
		{InputLine: 0, SKU: "SRC", Location: "FAR", Quantity: 10},
	})
	requireReserved("fifteen", map[string]int{"BEST": 4, "NEAR-A": 3, "NEAR-B": 2, "FAR": 10})
	_, _, err = b.create("cart-src", "one-more", 900, line("SRC", "", 1))
	if e := requireCode(t, err, domain.CodeOutOfStock); e.Available == nil || *e.Available != 0 {
		t.Fatalf("one more: available %s", optInt(e.Available))
	}
	b.requireInvariants(t)
}

// A basket with a line at location X and a sourced line of the same SKU: the
// explicit line is claimed first, the sourced line takes what is left, and
// nothing is counted twice.
func TestReservationSourcingMixedBasket(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "X", 1)
	mustLocation(t, b, "Y", 2)
	b.Stock(t, "MIX", "X", 3)
	b.Stock(t, "MIX", "Y", 2)
	type rl = domain.ReservationLine

	release := func(id string) {
		t.Helper()
		if _, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: id, Reason: domain.ReasonOther}); err != nil {
			t.Fatal(err)
		}
	}
	for i, tc := range []struct {
		name  string
		lines []domain.ReserveLine
		want  []rl
	}{
		{"sourced listed first", []domain.ReserveLine{line("MIX", "", 3), line("MIX", "X", 2)}, []rl{
			{InputLine: 0, SKU: "MIX", Location: "X", Quantity: 1},
			{InputLine: 0, SKU: "MIX", Location: "Y", Quantity: 2},
			{InputLine: 1, SKU: "MIX", Location: "X", Quantity: 2},
		}},
		{"explicit at both", []domain.ReserveLine{line("MIX", "", 2), line("MIX", "Y", 2), line("MIX", "X", 1)}, []rl{
			{InputLine: 0, SKU: "MIX", Location: "X", Quantity: 2},
			{InputLine: 1, SKU: "MIX", Location: "Y", Quantity: 2},
			{InputLine: 2, SKU: "MIX", Location: "X", Quantity: 1},
		}},
		{"two sourced lines", []domain.ReserveLine{line("MIX", "", 2), line("MIX", "", 3)}, []rl{
			{InputLine: 0, SKU: "MIX", Location: "X", Quantity: 2},
			{InputLine: 1, SKU: "MIX", Location: "X", Quantity: 1},
			{InputLine: 1, SKU: "MIX", Location: "Y", Quantity: 2},
		}},
	} {
		res := b.mustCreate(t, "cart-mix", fmt.Sprintf("ok-%d", i), 900, tc.lines...)
		if !slices.Equal(res.Lines, tc.want) {
			t.Fatalf("%s: lines %+v, want %+v", tc.name, res.Lines, tc.want)
		}
		if x, y := b.sqlInt(t, `SELECT reserved FROM balances b JOIN locations l ON l.id = b.location_id WHERE l.code = 'X'`),
			b.sqlInt(t, `SELECT reserved FROM balances b JOIN locations l ON l.id = b.location_id WHERE l.code = 'Y'`); x != 3 || y != 2 {
			t.Fatalf("%s: reserved X %d Y %d, want 3 and 2", tc.name, x, y)
		}
		release(res.ID)
	}

	// One more than the five there are: refused on the sourced line, which
	// could have had only what the explicit line leaves (5 - 2 = 3), not 5.
	before := b.basketSnapshot(t)
	_, _, err := b.create("cart-mix", "too-many", 900, line("MIX", "", 4), line("MIX", "X", 2))
	e := requireCode(t, err, domain.CodeOutOfStock)
	if e.Line == nil || *e.Line != 0 || e.Available == nil || *e.Available != 3 {
		t.Fatalf("too many: line %s available %s (%s)", optInt(e.Line), optInt(e.Available), e.Message)
	}
	// The explicit line is checked against X alone.
	_, _, err = b.create("cart-mix", "too-many-at-x", 900, line("MIX", "", 1), line("MIX", "X", 4))
	e = requireCode(t, err, domain.CodeOutOfStock)
	if e.Line == nil || *e.Line != 1 || e.Available == nil || *e.Available != 3 {
		t.Fatalf("too many at X: line %s available %s (%s)", optInt(e.Line), optInt(e.Available), e.Message)
	}
	b.requireRefusedCleanly(t, before, 2, "mixed baskets out of stock")
	b.requireInvariants(t)
}
