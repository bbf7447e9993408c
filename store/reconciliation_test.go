package store_test

import (
	"testing"

	"inventory/domain"
)

func TestReconciliation(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// A database with nothing in it is consistent.
	b.RequireReconciled(t)

	// Ordinary traffic keeps it consistent.
	mustLocation(t, b, "AMS", 1)
	mustLocation(t, b, "BER", 2)
	mustSKU(t, b, "HEADPHONES", domain.KindQuantity)
	mustSKU(t, b, "CABLE", domain.KindQuantity)
	mustReceive(t, b, "HEADPHONES", "AMS", 10)
	mustReceive(t, b, "HEADPHONES", "BER", 4)
	mustReceive(t, b, "CABLE", "AMS", 3)
	if _, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "HEADPHONES", Location: "AMS", Delta: -2, Reason: "damaged", Reference: "RMA-1"}); err != nil {
		t.Fatal(err)
	}
	setReserved(t, b, "HEADPHONES", "AMS", 3)
	b.RequireReconciled(t)

	// A change that bypasses the ledger is reported, for that balance only.
	if _, err := b.Pool.Exec(b.Ctx, `
		UPDATE balances SET on_hand = on_hand + 1
		WHERE sku_id = (SELECT id FROM skus WHERE code = 'HEADPHONES')
		  AND location_id = (SELECT id FROM locations WHERE code = 'BER')`); err != nil {
		t.Fatal(err)
	}
	issues, err := b.Store.Reconciliation(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(issues) != 1 {
		t.Fatalf("want exactly one issue, got %+v", issues)
	}
	want := domain.ReconciliationIssue{Kind: "on_hand_ledger_mismatch", SKU: "HEADPHONES", Location: "BER",
		Detail: "on_hand is 5 but the ledger sums to 4"}
	if issues[0] != want {
		t.Fatalf("issue %+v, want %+v", issues[0], want)
	}

	// Reconciliation reports; it never corrects.
	if onHand, _, _ := b.BalanceRow(t, "HEADPHONES", "BER"); onHand != 5 {
		t.Fatalf("reconciliation changed the balance: on hand %d", onHand)
	}

	// Every column is compared: a reserved bypass shows up as its own issue.
	if _, err := b.Pool.Exec(b.Ctx, `
		UPDATE balances SET reserved = reserved - 1
		WHERE sku_id = (SELECT id FROM skus WHERE code = 'HEADPHONES')
		  AND location_id = (SELECT id FROM locations WHERE code = 'AMS')`); err != nil {
		t.Fatal(err)
	}
	issues, err = b.Store.Reconciliation(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	// ... and as a balance that no longer matches its held lines.
	if len(issues) != 3 ||
		issues[0] != (domain.ReconciliationIssue{Kind: "reserved_ledger_mismatch", SKU: "HEADPHONES", Location: "AMS", Detail: "reserved is 2 but the ledger sums to 3"}) ||
		issues[1] != want ||
		issues[2] != (domain.ReconciliationIssue{Kind: "reserved_vs_held_lines", SKU: "HEADPHONES", Location: "AMS", Detail: "reserved is 2 but held reservation lines hold 3"}) {
		t.Fatalf("issues %+v", issues)
	}
}
