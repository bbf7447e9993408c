package store_test

import (
	"strings"
	"testing"
	"time"

	"inventory/domain"
)

func (b *testBundle) preorderSet(t *testing.T, sku, loc string, pending int) domain.Balance {
	t.Helper()
	bal, err := b.Store.PreorderSet(b.Ctx, domain.SetPreorderInput{SKU: sku, Location: loc, PendingSupply: pending})
	if err != nil {
		t.Fatalf("PreorderSet(%s@%s, %d): %v", sku, loc, pending, err)
	}
	return bal
}

// orderLine reads an order's only line through OrderGetByRef.
func (b *testBundle) orderLine(t *testing.T, ref string) domain.OrderLine {
	t.Helper()
	o, err := b.Store.OrderGetByRef(b.Ctx, domain.Scope{}, ref)
	if err != nil || o == nil || len(o.Lines) != 1 {
		t.Fatalf("order %s: %+v %v", ref, o, err)
	}
	return o.Lines[0]
}

// requirePreorderLine checks a reservation's only line: quantity and how much
// of it is pre-ordered.
func requirePreorderLine(t *testing.T, res domain.Reservation, quantity, preorder int) {
	t.Helper()
	if len(res.Lines) != 1 || res.Lines[0].Quantity != quantity || res.Lines[0].PreorderQuantity != preorder {
		t.Fatalf("reservation %s (%s): lines %+v, want quantity %d with %d pre-ordered", res.ID, res.CheckoutID, res.Lines, quantity, preorder)
	}
}

// Pre-orders of a CODES SKU: sold against expected supply while there are no
// codes, filled first-in-first-out by confirmation as codes are imported,
// revealed only once filled; setting the supply below what is pre-ordered is
// refused; released and expired holds give their pre-orders back; a line can
// be part stock, part pre-order; beyond stock plus what can be pre-ordered a
// line is OUT_OF_STOCK.
func TestPreorderCodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withCodesKeyring(t, b)
	b.codesSKU(t, "PG", "P1")
	b.Stock(t, "QS", "P1", 10)

	if bal := b.preorderSet(t, "PG", "P1", 5); bal.PendingSupply != 5 || bal.Preordered != 0 || bal.OnHand != 0 || bal.PreorderAvailable() != 5 {
		t.Fatalf("PreorderSet: %+v", bal)
	}
	// Reserved in the order C, B, A; confirmed A, B, C: the order of
	// confirmation is the order of allocation.
	res := map[string]domain.Reservation{}
	for _, name := range []string{"C", "B", "A"} {
		res[name] = b.mustCreate(t, "cart-"+name, "k", 600, line("PG", "P1", 1))
		requirePreorderLine(t, res[name], 1, 1)
	}
	b.requireFullBalance(t, "PG", "P1", fullBalance{PendingSupply: 5, Preordered: 3}, "three pre-orders held")
	lines := map[string]domain.OrderLine{}
	for _, name := range []string{"A", "B", "C"} {
		lines[name] = orderLineOf(t, b.codesConfirm(t, res[name].ID, "ORD-"+name))
		if ol := lines[name]; ol.PendingCodes != 1 || ol.Quantity != 1 || ol.Kind != domain.KindCodes {
			t.Fatalf("order line of %s: %+v", name, ol)
		}
	}
	b.requireFullBalance(t, "PG", "P1", fullBalance{PendingSupply: 5, Preordered: 3}, "three pre-orders confirmed")
	reveal := func(name string) []string {
		t.Helper()
		codes, err := b.Store.CodesReveal(checkoutCtx("cart-"+name), domain.Scope{CheckoutID: "cart-" + name}, lines[name].ID)
		if err != nil {
			t.Fatalf("reveal %s: %v", name, err)
		}
		return codes
	}
	for _, name := range []string{"A", "B", "C"} {
		if got := reveal(name); len(got) != 0 {
			t.Fatalf("%s revealed %q before any code arrived", name, got)
		}
	}
	b.requireCodeInvariants(t)

	// Two codes arrive: A and B get one each, C waits.
	batch := b.codesImport(t, "PG", "P1", "B-1", "PRE-0001", "PRE-0002")
	if want := (domain.CodeBatch{BatchRef: "B-1", Received: 2, Inserted: 2, PreordersFilled: 2}); batch != want {
		t.Fatalf("import: %+v, want %+v", batch, want)
	}
	if got := reveal("A"); len(got) != 1 || got[0] != "PRE-0001" {
		t.Fatalf("A reveals %q", got)
	}
	if got := reveal("B"); len(got) != 1 || got[0] != "PRE-0002" {
		t.Fatalf("B reveals %q", got)
	}
	if got := reveal("C"); len(got) != 0 {
		t.Fatalf("C reveals %q before its code arrived", got)
	}
	for name, pending := range map[string]int{"A": 0, "B": 0, "C": 1} {
		if ol := b.orderLine(t, "ORD-"+name); ol.PendingCodes != pending {
			t.Fatalf("order %s: %d pending, want %d", name, ol.PendingCodes, pending)
		}
	}
	b.requireFullBalance(t, "PG", "P1", fullBalance{OnHand: 0, Reserved: 0, PendingSupply: 3, Preordered: 1}, "after two codes arrived")
	var allocations []string
	for _, m := range movementsOf(t, b, "PG", "P1") {
		if m.Cause == "preorder_allocated" {
			if m.OnHandDelta != -1 || m.PreorderedDelta != -1 || m.PendingSupplyDelta != -1 || m.ReservedDelta != 0 {
				t.Fatalf("allocation ledger row: %+v", m)
			}
			allocations = append(allocations, deref(m.Reference))
		}
	}
	if strings.Join(allocations, ",") != "order ORD-A,order ORD-B" {
		t.Fatalf("allocations in the ledger: %q", allocations)
	}
	if n := b.sqlInt(t, `SELECT preorders_filled FROM code_batches WHERE batch_ref = 'B-1'`); n != 2 {
		t.Fatalf("batch records %d pre-orders filled", n)
	}
	b.requireCodeInvariants(t)

	// Expected supply cannot go below what is pre-ordered.
	before := b.state(t)
	_, err := b.Store.PreorderSet(b.Ctx, domain.SetPreorderInput{SKU: "PG", Location: "P1", PendingSupply: 0})
	if e := requireCode(t, err, domain.CodeBelowReserved); e.Available == nil || *e.Available != 1 {
		t.Fatalf("BELOW_RESERVED: %+v (available %s)", e, optInt(e.Available))
	}
	b.requireUnchanged(t, before, "a refused PreorderSet")
	// Down to exactly what is pre-ordered: nothing more can be pre-ordered.
	b.preorderSet(t, "PG", "P1", 1)
	_, _, err = b.create("cart-D", "k0", 600, line("PG", "P1", 1))
	if e := requireCode(t, err, domain.CodeOutOfStock); e.Available == nil || *e.Available != 0 {
		t.Fatalf("OUT_OF_STOCK with no capacity: available %s", optInt(e.Available))
	}
	b.preorderSet(t, "PG", "P1", 3)

	// A released pre-order hold gives its unit back; so does an expired one.
	d := b.mustCreate(t, "cart-D", "k1", 600, line("PG", "P1", 1))
	requirePreorderLine(t, d, 1, 1)
	b.requireFullBalance(t, "PG", "P1", fullBalance{PendingSupply: 3, Preordered: 2}, "D held")
	if rel, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: d.ID, Reason: domain.ReasonCustomerCancelled}); err != nil || rel.Status != domain.StatusReleased {
		t.Fatalf("release D: %+v %v", rel, err)
	}
	b.requireFullBalance(t, "PG", "P1", fullBalance{PendingSupply: 3, Preordered: 1}, "D released")
	e := b.mustCreate(t, "cart-E", "k", 1, line("PG", "P1", 2))
	requirePreorderLine(t, e, 2, 2)
	b.requireFullBalance(t, "PG", "P1", fullBalance{PendingSupply: 3, Preordered: 3}, "E held")
	time.Sleep(time.Until(e.ExpiresAt) + 20*time.Millisecond)
	if notBefore, _, err := b.Store.ReservationExpire(b.Ctx, e.ID); err != nil || notBefore != nil {
		t.Fatalf("expire E: %v %v", notBefore, err)
	}
	b.requireFullBalance(t, "PG", "P1", fullBalance{PendingSupply: 3, Preordered: 1}, "E expired")
	b.requireCodeInvariants(t)

	// C's code arrives; then one more, which stays in stock.
	if batch := b.codesImport(t, "PG", "P1", "B-2", "PRE-0003"); batch.PreordersFilled != 1 || batch.Inserted != 1 {
		t.Fatalf("import B-2: %+v", batch)
	}
	if got := reveal("C"); len(got) != 1 || got[0] != "PRE-0003" {
		t.Fatalf("C reveals %q", got)
	}
	if batch := b.codesImport(t, "PG", "P1", "B-3", "PRE-0004"); batch.PreordersFilled != 0 || batch.Inserted != 1 {
		t.Fatalf("import B-3: %+v", batch)
	}
	// Three were expected: C's filled one, the spare arrived as stock, so one
	// is still expected. Then the supplier announces two in all.
	b.requireFullBalance(t, "PG", "P1", fullBalance{OnHand: 1, PendingSupply: 1}, "one code in stock, one expected")
	b.preorderSet(t, "PG", "P1", 2)
	b.requireFullBalance(t, "PG", "P1", fullBalance{OnHand: 1, PendingSupply: 2}, "one code in stock, two expected")

	// Beyond stock plus pre-order capacity (1 + 2): OUT_OF_STOCK naming the
	// line, with what could be had; nothing changes.
	before = b.state(t)
	_, _, err = b.create("cart-F", "k0", 600, line("QS", "P1", 1), line("PG", "P1", 4))
	oos := requireCode(t, err, domain.CodeOutOfStock)
	if oos.Line == nil || *oos.Line != 1 || oos.SKU != "PG" || oos.Available == nil || *oos.Available != 3 {
		t.Fatalf("OUT_OF_STOCK: %+v (line %s, available %s)", oos, optInt(oos.Line), optInt(oos.Available))
	}
	b.requireUnchanged(t, before, "a refused basket")

	// Exactly the capacity: one code from stock, two pre-ordered.
	f := b.mustCreate(t, "cart-F", "k1", 600, line("PG", "P1", 3))
	requirePreorderLine(t, f, 3, 2)
	b.requireFullBalance(t, "PG", "P1", fullBalance{OnHand: 1, Reserved: 1, PendingSupply: 2, Preordered: 2}, "F held")
	if n := b.sqlInt(t, `SELECT count(*) FROM codes c JOIN reservation_lines rl ON rl.id = c.reservation_line_id
		WHERE rl.reservation_id = $1 AND c.status = 'held'`, f.ID); n != 1 {
		t.Fatalf("F holds %d codes, want 1", n)
	}
	b.requireCodeInvariants(t)
	lines["F"] = orderLineOf(t, b.codesConfirm(t, f.ID, "ORD-F"))
	if lines["F"].PendingCodes != 2 {
		t.Fatalf("F order line: %+v", lines["F"])
	}
	if got := reveal("F"); strings.Join(got, "|") != "PRE-0004" {
		t.Fatalf("F reveals %q", got)
	}
	b.requireFullBalance(t, "PG", "P1", fullBalance{PendingSupply: 2, Preordered: 2}, "F confirmed")

	// The rest of F's codes arrive with one to spare.
	if batch := b.codesImport(t, "PG", "P1", "B-4", "PRE-0005", "PRE-0006", "PRE-0007"); batch.PreordersFilled != 2 || batch.Inserted != 3 {
		t.Fatalf("import B-4: %+v", batch)
	}
	if got := reveal("F"); strings.Join(got, "|") != "PRE-0004|PRE-0005|PRE-0006" {
		t.Fatalf("F reveals %q", got)
	}
	if ol := b.orderLine(t, "ORD-F"); ol.PendingCodes != 0 {
		t.Fatalf("F still pending: %+v", ol)
	}
	b.requireFullBalance(t, "PG", "P1", fullBalance{OnHand: 1}, "all pre-orders filled")
	b.requireCodeInvariants(t)
}
