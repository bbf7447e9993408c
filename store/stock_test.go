package store_test

import (
	"fmt"
	"strings"
	"testing"

	"inventory/domain"
)

func TestStockReceive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)
	mustLocation(t, b, "BER", 2)
	mustSKU(t, b, "HEADPHONES", domain.KindQuantity)
	mustSKU(t, b, "GIFTCARD", domain.KindCodes)

	bal, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "HEADPHONES", Location: "AMS", Quantity: 12, Reference: "PO-1001"})
	if err != nil {
		t.Fatal(err)
	}
	if bal.SKU != "HEADPHONES" || bal.Location != "AMS" || bal.OnHand != 12 || bal.Reserved != 0 ||
		bal.PendingSupply != 0 || bal.Preordered != 0 || bal.UpdatedAt.IsZero() {
		t.Fatalf("returned balance %+v", bal)
	}
	if onHand, reserved, ok := b.BalanceRow(t, "HEADPHONES", "AMS"); !ok || onHand != 12 || reserved != 0 {
		t.Fatalf("stored balance: on hand %d reserved %d exists %v", onHand, reserved, ok)
	}
	ms := movementsOf(t, b, "HEADPHONES", "AMS")
	if len(ms) != 1 {
		t.Fatalf("want exactly one ledger row, got %+v", ms)
	}
	m := ms[0]
	if m.Cause != "received" || m.OnHandDelta != 12 || m.ReservedDelta != 0 || m.PendingSupplyDelta != 0 ||
		m.PreorderedDelta != 0 || deref(m.Reference) != "PO-1001" || m.Reason != nil || m.Actor != "test-admin" || m.ReservationID != nil {
		t.Fatalf("ledger row %+v (reason %s, reference %s)", m, deref(m.Reason), deref(m.Reference))
	}

	// A second receive adds to the same balance and writes one more row.
	bal, err = b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "HEADPHONES", Location: "AMS", Quantity: 3, Reference: "PO-1002"})
	if err != nil {
		t.Fatal(err)
	}
	if bal.OnHand != 3+12 {
		t.Fatalf("second receive: on hand %d, want 15", bal.OnHand)
	}
	if s := b.state(t); s.balances != 1 || s.movements != 2 {
		t.Fatalf("after two receives: %d balances, %d movements; want 1, 2", s.balances, s.movements)
	}
	// The largest allowed quantity is accepted.
	if bal, err = b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "HEADPHONES", Location: "BER", Quantity: domain.MaxQuantity, Reference: "PO-big"}); err != nil || bal.OnHand != domain.MaxQuantity {
		t.Fatalf("receiving MaxQuantity: %+v, %v", bal, err)
	}

	refused := []struct {
		name string
		in   domain.ReceiveStockInput
		code domain.ErrorCode
	}{
		{"unknown SKU", domain.ReceiveStockInput{SKU: "NOPE", Location: "AMS", Quantity: 1, Reference: "r"}, domain.CodeUnknownSKU},
		{"unknown location", domain.ReceiveStockInput{SKU: "HEADPHONES", Location: "NOPE", Quantity: 1, Reference: "r"}, domain.CodeUnknownLocation},
		{"unknown SKU and location", domain.ReceiveStockInput{SKU: "NOPE", Location: "NOPE", Quantity: 1, Reference: "r"}, domain.CodeUnknownSKU},
		{"CODES SKU", domain.ReceiveStockInput{SKU: "GIFTCARD", Location: "AMS", Quantity: 1, Reference: "r"}, domain.CodeInvalidInput},
		{"CODES SKU at a new location", domain.ReceiveStockInput{SKU: "GIFTCARD", Location: "BER", Quantity: 1, Reference: "r"}, domain.CodeInvalidInput},
		{"quantity 0", domain.ReceiveStockInput{SKU: "HEADPHONES", Location: "AMS", Quantity: 0, Reference: "r"}, domain.CodeInvalidInput},
		{"quantity -1", domain.ReceiveStockInput{SKU: "HEADPHONES", Location: "AMS", Quantity: -1, Reference: "r"}, domain.CodeInvalidInput},
		{"quantity 1_000_001", domain.ReceiveStockInput{SKU: "HEADPHONES", Location: "AMS", Quantity: domain.MaxQuantity + 1, Reference: "r"}, domain.CodeInvalidInput},
		{"129-character SKU", domain.ReceiveStockInput{SKU: strings.Repeat("H", 129), Location: "AMS", Quantity: 1, Reference: "r"}, domain.CodeInvalidInput},
		{"empty SKU", domain.ReceiveStockInput{SKU: "", Location: "AMS", Quantity: 1, Reference: "r"}, domain.CodeInvalidInput},
		{"129-character location", domain.ReceiveStockInput{SKU: "HEADPHONES", Location: strings.Repeat("L", 129), Quantity: 1, Reference: "r"}, domain.CodeInvalidInput},
		{"empty reference", domain.ReceiveStockInput{SKU: "HEADPHONES", Location: "AMS", Quantity: 1, Reference: ""}, domain.CodeInvalidInput},
		{"blank reference", domain.ReceiveStockInput{SKU: "HEADPHONES", Location: "AMS", Quantity: 1, Reference: "   "}, domain.CodeInvalidInput},
		{"too long reference", domain.ReceiveStockInput{SKU: "HEADPHONES", Location: "AMS", Quantity: 1, Reference: strings.Repeat("r", domain.MaxReferenceLength+1)}, domain.CodeInvalidInput},
	}
	for _, tc := range refused {
		before := b.state(t)
		_, err := b.Store.StockReceive(b.Ctx, tc.in)
		e := requireCode(t, err, tc.code)
		if tc.code == domain.CodeUnknownSKU && e.SKU != tc.in.SKU {
			t.Fatalf("%s: error names SKU %q, want %q", tc.name, e.SKU, tc.in.SKU)
		}
		b.requireUnchanged(t, before, tc.name)
	}
	b.RequireReconciled(t)
}

// TestStockReceivePastMaximum: a receive that would overflow the stored
// integer is refused as INVALID_INPUT and changes nothing.
func TestStockReceivePastMaximum(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)
	mustSKU(t, b, "HEADPHONES", domain.KindQuantity)
	mustReceive(t, b, "HEADPHONES", "AMS", 1)
	// Bring on_hand near the maximum the way the ledger would record it.
	if _, err := b.Pool.Exec(b.Ctx, `
		WITH u AS (UPDATE balances SET on_hand = 2147483647 - 10 RETURNING sku_id, location_id)
		INSERT INTO stock_movements (sku_id, location_id, on_hand_delta, cause, actor)
		SELECT sku_id, location_id, 2147483647 - 11, 'adjusted', 'test' FROM u`); err != nil {
		t.Fatal(err)
	}
	b.RequireReconciled(t)
	before := b.state(t)
	_, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "HEADPHONES", Location: "AMS", Quantity: 11, Reference: "PO-overflow"})
	requireCode(t, err, domain.CodeInvalidInput)
	b.requireUnchanged(t, before, "an overflowing receive")
	if bal := mustReceive(t, b, "HEADPHONES", "AMS", 10); bal.OnHand != 2147483647 {
		t.Fatalf("receiving up to the maximum: on hand %d", bal.OnHand)
	}
	b.RequireReconciled(t)
}

func TestStockAdjust(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)
	mustLocation(t, b, "BER", 2)
	mustSKU(t, b, "HEADPHONES", domain.KindQuantity)
	mustSKU(t, b, "GIFTCARD", domain.KindCodes)
	mustReceive(t, b, "HEADPHONES", "AMS", 20)

	// Each adjustment under a count sheet line of its own (COUNT-7-1, -2, …).
	counts := 0
	adjust := func(delta int, expected *int) (domain.StockChange, error) {
		counts++
		return b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "HEADPHONES", Location: "AMS", Delta: delta,
			Reason: "cycle count", Reference: fmt.Sprintf("COUNT-7-%d", counts), ExpectedOnHand: expected})
	}
	requireOnHand := func(want int) {
		t.Helper()
		if onHand, _, _ := b.BalanceRow(t, "HEADPHONES", "AMS"); onHand != want {
			t.Fatalf("on hand %d, want %d", onHand, want)
		}
	}

	// Positive, then negative, each with its ledger row.
	bal, err := adjust(+5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bal.SKU != "HEADPHONES" || bal.Location != "AMS" || bal.OnHand != 25 || bal.Reserved != 0 {
		t.Fatalf("after +5: %+v", bal)
	}
	bal, err = b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "HEADPHONES", Location: "AMS", Delta: -8, Reason: "damaged", Reference: "RMA-3"})
	if err != nil {
		t.Fatal(err)
	}
	if bal.OnHand != 17 {
		t.Fatalf("after -8: %+v", bal)
	}
	requireOnHand(17)
	ms := movementsOf(t, b, "HEADPHONES", "AMS")
	if len(ms) != 3 {
		t.Fatalf("want 3 ledger rows (receive, +5, -8), got %+v", ms)
	}
	for i, want := range []struct {
		delta             int
		reason, reference string
	}{{+5, "cycle count", "COUNT-7-1"}, {-8, "damaged", "RMA-3"}} {
		m := ms[i+1]
		if m.Cause != "adjusted" || m.OnHandDelta != want.delta || m.ReservedDelta != 0 || m.PendingSupplyDelta != 0 ||
			m.PreorderedDelta != 0 || deref(m.Reason) != want.reason || deref(m.Reference) != want.reference || m.Actor != "test-admin" {
			t.Fatalf("ledger row %d: %+v (reason %s, reference %s)", i+1, m, deref(m.Reason), deref(m.Reference))
		}
	}

	// Refused without touching the database.
	refuse := func(name string, in domain.AdjustStockInput, code domain.ErrorCode) *domain.Error {
		t.Helper()
		before := b.state(t)
		_, err := b.Store.StockAdjust(b.Ctx, in)
		e := requireCode(t, err, code)
		b.requireUnchanged(t, before, name)
		return e
	}
	valid := func(mod func(*domain.AdjustStockInput)) domain.AdjustStockInput {
		in := domain.AdjustStockInput{SKU: "HEADPHONES", Location: "AMS", Delta: 1, Reason: "count", Reference: "ref"}
		mod(&in)
		return in
	}
	refuse("delta 0", valid(func(in *domain.AdjustStockInput) { in.Delta = 0 }), domain.CodeInvalidInput)
	refuse("delta past the maximum", valid(func(in *domain.AdjustStockInput) { in.Delta = domain.MaxQuantity + 1 }), domain.CodeInvalidInput)
	refuse("delta past the minimum", valid(func(in *domain.AdjustStockInput) { in.Delta = -domain.MaxQuantity - 1 }), domain.CodeInvalidInput)
	refuse("blank reason", valid(func(in *domain.AdjustStockInput) { in.Reason = " " }), domain.CodeInvalidInput)
	refuse("too long reason", valid(func(in *domain.AdjustStockInput) { in.Reason = strings.Repeat("r", domain.MaxReasonLength+1) }), domain.CodeInvalidInput)
	refuse("empty reference", valid(func(in *domain.AdjustStockInput) { in.Reference = "" }), domain.CodeInvalidInput)
	refuse("negative expected on hand", valid(func(in *domain.AdjustStockInput) { in.ExpectedOnHand = intPtr(-1) }), domain.CodeInvalidInput)
	refuse("129-character SKU", valid(func(in *domain.AdjustStockInput) { in.SKU = strings.Repeat("H", 129) }), domain.CodeInvalidInput)
	refuse("unknown SKU", valid(func(in *domain.AdjustStockInput) { in.SKU = "NOPE" }), domain.CodeUnknownSKU)
	refuse("unknown location", valid(func(in *domain.AdjustStockInput) { in.Location = "NOPE" }), domain.CodeUnknownLocation)
	refuse("CODES SKU", valid(func(in *domain.AdjustStockInput) { in.SKU = "GIFTCARD" }), domain.CodeInvalidInput)
	refuse("CODES SKU decrease", valid(func(in *domain.AdjustStockInput) { in.SKU = "GIFTCARD"; in.Delta = -1 }), domain.CodeInvalidInput)

	// Below zero with nothing reserved: BELOW_RESERVED, all of on hand removable.
	e := refuse("decrease below zero", valid(func(in *domain.AdjustStockInput) { in.Delta = -18 }), domain.CodeBelowReserved)
	if e.Available == nil || *e.Available != 17 || e.SKU != "HEADPHONES" {
		t.Fatalf("below zero: Available %s SKU %q, want 17 HEADPHONES", optInt(e.Available), e.SKU)
	}
	// Exactly to zero is allowed, and back.
	if bal, err := adjust(-17, nil); err != nil || bal.OnHand != 0 {
		t.Fatalf("down to zero: %+v, %v", bal, err)
	}
	if bal, err := adjust(+30, nil); err != nil || bal.OnHand != 30 {
		t.Fatalf("back up: %+v, %v", bal, err)
	}

	// With holds: on hand 30, reserved 12, so at most 18 may go.
	setReserved(t, b, "HEADPHONES", "AMS", 12)
	b.RequireReconciled(t)
	for _, delta := range []int{-19, -30, -31} {
		e := refuse("decrease below reserved", valid(func(in *domain.AdjustStockInput) { in.Delta = delta }), domain.CodeBelowReserved)
		if e.Available == nil || *e.Available != 30-12 {
			t.Fatalf("delta %d: Available %s, want 18", delta, optInt(e.Available))
		}
	}
	bal, err = adjust(-18, nil)
	if err != nil {
		t.Fatalf("decrease down to exactly reserved: %v", err)
	}
	if bal.OnHand != 12 || bal.Reserved != 12 || bal.Available() != 0 {
		t.Fatalf("after decrease to reserved: %+v", bal)
	}
	e = refuse("decrease with nothing available", valid(func(in *domain.AdjustStockInput) { in.Delta = -1 }), domain.CodeBelowReserved)
	if e.Available == nil || *e.Available != 0 {
		t.Fatalf("nothing available: Available %s, want 0", optInt(e.Available))
	}
	// Increases are always fine while holds exist.
	if bal, err = adjust(+8, nil); err != nil || bal.OnHand != 20 || bal.Reserved != 12 {
		t.Fatalf("increase with holds: %+v, %v", bal, err)
	}

	// Compare-and-swap on the count the caller saw.
	refuse("stale expected on hand", valid(func(in *domain.AdjustStockInput) { in.Delta = +1; in.ExpectedOnHand = intPtr(19) }), domain.CodeStaleQuantity)
	refuse("stale expected on hand (decrease)", valid(func(in *domain.AdjustStockInput) { in.Delta = -1; in.ExpectedOnHand = intPtr(21) }), domain.CodeStaleQuantity)
	if bal, err = adjust(-3, intPtr(20)); err != nil || bal.OnHand != 17 {
		t.Fatalf("expected on hand matching: %+v, %v", bal, err)
	}
	if bal, err = adjust(+3, intPtr(17)); err != nil || bal.OnHand != 20 {
		t.Fatalf("expected on hand matching: %+v, %v", bal, err)
	}
	// A matching expectation does not lift the reserved floor.
	refuse("matching expectation below reserved", valid(func(in *domain.AdjustStockInput) { in.Delta = -9; in.ExpectedOnHand = intPtr(20) }), domain.CodeBelowReserved)
	requireOnHand(20)

	// A SKU/location pair without a balance row yet: a decrease is refused
	// (and leaves no row behind), an increase creates the balance.
	refuse("decrease of a missing balance", domain.AdjustStockInput{SKU: "HEADPHONES", Location: "BER", Delta: -1, Reason: "count", Reference: "ref"}, domain.CodeBelowReserved)
	refuse("stale expectation on a missing balance", domain.AdjustStockInput{SKU: "HEADPHONES", Location: "BER", Delta: 1, Reason: "count", Reference: "ref", ExpectedOnHand: intPtr(1)}, domain.CodeStaleQuantity)
	if _, _, ok := b.BalanceRow(t, "HEADPHONES", "BER"); ok {
		t.Fatal("a refused adjustment left a balance row behind")
	}
	bal, err = b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "HEADPHONES", Location: "BER", Delta: 4, Reason: "found", Reference: "COUNT-8", ExpectedOnHand: intPtr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if bal.SKU != "HEADPHONES" || bal.Location != "BER" || bal.OnHand != 4 || bal.Reserved != 0 {
		t.Fatalf("new balance %+v", bal)
	}
	if onHand, _, ok := b.BalanceRow(t, "HEADPHONES", "BER"); !ok || onHand != 4 {
		t.Fatalf("new balance row: on hand %d exists %v", onHand, ok)
	}
	if ms := movementsOf(t, b, "HEADPHONES", "BER"); len(ms) != 1 || ms[0].Cause != "adjusted" || ms[0].OnHandDelta != 4 ||
		deref(ms[0].Reason) != "found" || deref(ms[0].Reference) != "COUNT-8" {
		t.Fatalf("ledger of the new balance: %+v", ms)
	}
	b.RequireReconciled(t)
}
