package store_test

import (
	"slices"
	"strings"
	"testing"

	"inventory/domain"
)

// revealRecord is one code_reveals row.
type revealRecord struct {
	orderLineID int64
	actor       string
	codes       int
}

func (b *testBundle) revealRecords(t *testing.T) []revealRecord {
	t.Helper()
	rows, err := b.Pool.Query(b.Ctx, `SELECT order_line_id, actor, codes FROM code_reveals ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []revealRecord
	for rows.Next() {
		var r revealRecord
		if err := rows.Scan(&r.orderLineID, &r.actor, &r.codes); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Sold codes are revealed to their order's checkout and to the service or an
// admin (the zero scope), in the order they were claimed, and every reveal is
// recorded with who asked and how many codes it showed. Another checkout is
// told NOT_FOUND and nothing is recorded.
func TestCodesReveal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withCodesKeyring(t, b)
	b.codesSKU(t, "GC", "AMS")
	b.Stock(t, "QS", "AMS", 5)
	b.codesImport(t, "GC", "AMS", "B-1", " gift-AAAA-0001 ", "GIFT-AAAA-0002", "GIFT-AAAA-0003")
	b.codesImport(t, "GC", "AMS", "B-2", "GIFT-BBBB-0004", "GIFT-BBBB-0005")

	a := b.mustCreate(t, "cart-A", "k", 600, line("GC", "AMS", 2))
	bb := b.mustCreate(t, "cart-B", "k", 600, line("QS", "AMS", 1), line("GC", "AMS", 3))
	lineA := orderLineOf(t, b.codesConfirm(t, a.ID, "ORD-A"))
	resB := b.codesConfirm(t, bb.ID, "ORD-B")
	var lineB, lineBQty domain.OrderLine
	for _, ol := range resB.Order.Lines {
		switch ol.Kind {
		case domain.KindCodes:
			lineB = ol
		case domain.KindQuantity:
			lineBQty = ol
		}
	}
	if lineB.ID == 0 || lineBQty.ID == 0 || lineB.SKU != "GC" || lineB.Quantity != 3 || lineB.PendingCodes != 0 {
		t.Fatalf("order B lines: %+v", resB.Order.Lines)
	}

	// The order's own checkout, as that checkout.
	ctxA := checkoutCtx("cart-A")
	got, err := b.Store.CodesReveal(ctxA, domain.Scope{CheckoutID: "cart-A"}, lineA.ID)
	if err != nil || strings.Join(got, "|") != "gift-AAAA-0001|GIFT-AAAA-0002" {
		t.Fatalf("cart-A reveals %q %v", got, err)
	}
	want := []revealRecord{{lineA.ID, "checkout:cart-A", 2}}
	if recs := b.revealRecords(t); !slices.Equal(recs, want) {
		t.Fatalf("reveal records %+v, want %+v", recs, want)
	}

	// Another checkout: NOT_FOUND, as for a line that does not exist, and
	// nothing recorded.
	ctxB := checkoutCtx("cart-B")
	_, err = b.Store.CodesReveal(ctxB, domain.Scope{CheckoutID: "cart-B"}, lineA.ID)
	requireCode(t, err, domain.CodeNotFound)
	_, err = b.Store.CodesReveal(ctxA, domain.Scope{CheckoutID: "cart-A"}, lineB.ID)
	requireCode(t, err, domain.CodeNotFound)
	_, err = b.Store.CodesReveal(b.Ctx, domain.Scope{}, lineB.ID+1000)
	requireCode(t, err, domain.CodeNotFound)
	if recs := b.revealRecords(t); !slices.Equal(recs, want) {
		t.Fatalf("refused reveals were recorded: %+v", recs)
	}

	// The zero scope (service, admin) sees every order; B's codes span two
	// batches, in claim order.
	if got := b.codesReveal(t, lineB.ID); strings.Join(got, "|") != "GIFT-AAAA-0003|GIFT-BBBB-0004|GIFT-BBBB-0005" {
		t.Fatalf("admin reveals %q", got)
	}
	service := domain.WithActor(b.Ctx, domain.Actor{Role: domain.RoleService, Name: "checkout-backend"})
	if got, err := b.Store.CodesReveal(service, domain.Scope{}, lineA.ID); err != nil || len(got) != 2 {
		t.Fatalf("service reveals %q %v", got, err)
	}
	// Revealing again is another recorded reveal.
	if got, err := b.Store.CodesReveal(ctxB, domain.Scope{CheckoutID: "cart-B"}, lineB.ID); err != nil || len(got) != 3 {
		t.Fatalf("cart-B reveals %q %v", got, err)
	}
	want = append(want, revealRecord{lineB.ID, "test-admin", 3}, revealRecord{lineA.ID, "checkout-backend", 2}, revealRecord{lineB.ID, "checkout:cart-B", 3})
	if recs := b.revealRecords(t); !slices.Equal(recs, want) {
		t.Fatalf("reveal records %+v, want %+v", recs, want)
	}

	// A QUANTITY line has no codes: nothing to show, so nothing recorded
	// (code_reveals records each time codes were shown).
	if got, err := b.Store.CodesReveal(ctxB, domain.Scope{CheckoutID: "cart-B"}, lineBQty.ID); err != nil || len(got) != 0 {
		t.Fatalf("QUANTITY line reveals %q %v", got, err)
	}
	if recs := b.revealRecords(t); !slices.Equal(recs, want) {
		t.Fatalf("an empty reveal was recorded: %+v", recs)
	}
	b.requireCodeInvariants(t)
}
