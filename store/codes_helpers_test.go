package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"inventory/codecrypt"
	"inventory/codefile"
	"inventory/domain"
)

// Helpers for the code and pre-order tests. setup(t) returns a store with a
// throwaway keyring; code tests take their own from withCodesKeyring.

// withCodesKeyring gives the bundle's store a fresh keyring (key id k1, random
// AES and HMAC keys) and returns it.
func withCodesKeyring(t *testing.T, b *testBundle) *codecrypt.Keyring {
	t.Helper()
	k, err := codecrypt.ParseKeyring("k1:"+codecrypt.NewKey(), codecrypt.NewKey())
	if err != nil {
		t.Fatalf("ParseKeyring: %v", err)
	}
	b.Store.Keyring = k
	return k
}

// codesSKU creates a CODES SKU and the locations named (existing ones are
// fine).
func (b *testBundle) codesSKU(t *testing.T, sku string, locations ...string) {
	t.Helper()
	for _, loc := range locations {
		if _, err := b.Store.LocationCreate(b.Ctx, domain.CreateLocationInput{Code: loc, Name: loc}); err != nil {
			if e, ok := domain.AsError(err); !ok || e.Code != domain.CodeAlreadyExists {
				t.Fatal(err)
			}
		}
	}
	if _, err := b.Store.SKUCreate(b.Ctx, domain.CreateSKUInput{Code: sku, Name: sku, Kind: domain.KindCodes}); err != nil {
		t.Fatal(err)
	}
}

// codesImport imports codes (one per element) as batch ref and fails the
// test on any error.
func (b *testBundle) codesImport(t *testing.T, sku, loc, ref string, codes ...string) domain.CodeBatch {
	t.Helper()
	batch, err := b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: sku, Location: loc, BatchRef: ref}, codefile.List(codes))
	if err != nil {
		t.Fatalf("CodesImport(%s@%s, %s): %v", sku, loc, ref, err)
	}
	return batch
}

// codesConfirm confirms a reservation as orderRef with the zero scope and
// fails the test on any error.
func (b *testBundle) codesConfirm(t *testing.T, id, orderRef string) domain.Reservation {
	t.Helper()
	res, err := b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: id, OrderRef: orderRef})
	if err != nil {
		t.Fatalf("confirm %s as %s: %v", id, orderRef, err)
	}
	if res.Status != domain.StatusConfirmed || res.Order == nil || res.Order.Ref != orderRef {
		t.Fatalf("confirm %s: status %s order %+v", id, res.Status, res.Order)
	}
	return res
}

// codesReveal reveals an order line's codes with the bundle's admin context
// and the zero scope, failing the test on any error.
func (b *testBundle) codesReveal(t *testing.T, orderLineID int64) []string {
	t.Helper()
	codes, err := b.Store.CodesReveal(b.Ctx, domain.Scope{}, orderLineID)
	if err != nil {
		t.Fatalf("CodesReveal(%d): %v", orderLineID, err)
	}
	return codes
}

// checkoutCtx is a context acting as the checkout token of checkoutID.
func checkoutCtx(checkoutID string) context.Context {
	return domain.WithActor(context.Background(), domain.Actor{Role: domain.RoleCheckout, Name: "checkout:" + checkoutID, CheckoutID: checkoutID})
}

// fullBalance is one balance's four counters, read in SQL.
type fullBalance struct {
	OnHand, Reserved, PendingSupply, Preordered int
}

func (b *testBundle) fullBalance(t *testing.T, sku, loc string) fullBalance {
	t.Helper()
	var f fullBalance
	err := b.Pool.QueryRow(b.Ctx, `
		SELECT b.on_hand, b.reserved, b.pending_supply, b.preordered
		FROM balances b JOIN skus s ON s.id = b.sku_id JOIN locations l ON l.id = b.location_id
		WHERE s.code = $1 AND l.code = $2`, sku, loc).Scan(&f.OnHand, &f.Reserved, &f.PendingSupply, &f.Preordered)
	if err != nil {
		t.Fatalf("balance %s@%s: %v", sku, loc, err)
	}
	return f
}

func (b *testBundle) requireFullBalance(t *testing.T, sku, loc string, want fullBalance, when string) {
	t.Helper()
	if got := b.fullBalance(t, sku, loc); got != want {
		t.Fatalf("%s: balance %s@%s is %+v, want %+v", when, sku, loc, got, want)
	}
}

// codeRowsText returns every code row of a SKU as its full row text, by id:
// a fingerprint of status, links, ciphertext, key id and updated_at.
func (b *testBundle) codeRowsText(t *testing.T, sku string) map[int64]string {
	t.Helper()
	rows, err := b.Pool.Query(b.Ctx, `SELECT c.id, c::text FROM codes c JOIN skus s ON s.id = c.sku_id WHERE s.code = $1`, sku)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]string{}
	var id int64
	var text string
	if _, err := pgx.ForEachRow(rows, []any{&id, &text}, func() error { out[id] = text; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// codeInvariantChecks are the SQL statements behind requireCodeInvariants;
// each counts violations.
var codeInvariantChecks = []struct{ what, query string }{
	{"codes in no known state, or with links that do not fit the state", `
		SELECT count(*) FROM codes WHERE NOT (
			status = 'available' AND reservation_line_id IS NULL AND order_line_id IS NULL OR
			status = 'held' AND reservation_line_id IS NOT NULL AND order_line_id IS NULL OR
			status IN ('sold', 'void') AND reservation_line_id IS NOT NULL AND order_line_id IS NOT NULL)`},
	{"held codes on a line of a reservation that is not held", `
		SELECT count(*) FROM codes c JOIN reservation_lines rl ON rl.id = c.reservation_line_id JOIN reservations r ON r.id = rl.reservation_id
		WHERE c.status = 'held' AND r.status <> 'held'`},
	{"held or sold codes on a line of another SKU or location", `
		SELECT count(*) FROM codes c JOIN reservation_lines rl ON rl.id = c.reservation_line_id
		WHERE rl.sku_id <> c.sku_id OR rl.location_id <> c.location_id`},
	{"held reservation lines of CODES SKUs whose held codes are not their in-stock quantity", `
		SELECT count(*) FROM reservation_lines rl JOIN reservations r ON r.id = rl.reservation_id JOIN skus s ON s.id = rl.sku_id
		WHERE r.status = 'held' AND s.kind = 'codes'
		  AND (SELECT count(*) FROM codes c WHERE c.reservation_line_id = rl.id AND c.status = 'held') <> rl.quantity - rl.preorder_quantity`},
	{"reservation lines linked to more codes than their quantity", `
		SELECT count(*) FROM reservation_lines rl
		WHERE (SELECT count(*) FROM codes c WHERE c.reservation_line_id = rl.id) > rl.quantity`},
	{"sold or void codes whose order line is not the one of their reservation line, or of another SKU", `
		SELECT count(*) FROM codes c JOIN order_lines ol ON ol.id = c.order_line_id
		WHERE c.status IN ('sold', 'void') AND (ol.reservation_line_id <> c.reservation_line_id OR ol.sku_id <> c.sku_id OR ol.location_id <> c.location_id)`},
	{"CODES order lines whose sold codes are not quantity - pending - cancelled, or with more sold and void codes than quantity - pending", `
		SELECT count(*) FROM order_lines ol JOIN skus s ON s.id = ol.sku_id
		WHERE s.kind = 'codes'
		  AND ((SELECT count(*) FROM codes c WHERE c.order_line_id = ol.id AND c.status = 'sold') <> ol.quantity - ol.pending - ol.cancelled
		       OR (SELECT count(*) FROM codes c WHERE c.order_line_id = ol.id AND c.status IN ('sold', 'void')) > ol.quantity - ol.pending)`},
	{"codes balances whose on_hand is not the available and held codes or reserved not the held ones", `
		SELECT count(*) FROM balances b JOIN skus s ON s.id = b.sku_id
		WHERE s.kind = 'codes' AND (
			b.on_hand <> (SELECT count(*) FROM codes c WHERE c.sku_id = b.sku_id AND c.location_id = b.location_id AND c.status IN ('available', 'held')) OR
			b.reserved <> (SELECT count(*) FROM codes c WHERE c.sku_id = b.sku_id AND c.location_id = b.location_id AND c.status = 'held'))`},
	{"batches whose inserted count is not their code rows", `
		SELECT count(*) FROM code_batches cb WHERE cb.inserted <> (SELECT count(*) FROM codes c WHERE c.batch_id = cb.id)`},
}

// requireCodeInvariants checks what must hold for codes after any workload,
// then the balance invariants and reconciliation (requireInvariants).
func (b *testBundle) requireCodeInvariants(t *testing.T) {
	t.Helper()
	for _, check := range codeInvariantChecks {
		if n := b.sqlInt(t, check.query); n != 0 {
			t.Errorf("%d %s", n, check.what)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	b.requireInvariants(t)
}

// codesThenError yields the given codes, then err: a file that breaks off.
func codesThenError(err error, codes ...string) func(yield func(string, error) bool) {
	return func(yield func(string, error) bool) {
		for _, c := range codes {
			if !yield(c, nil) {
				return
			}
		}
		yield("", err)
	}
}

// orderLineOf returns the only order line of a confirmed reservation.
func orderLineOf(t *testing.T, res domain.Reservation) domain.OrderLine {
	t.Helper()
	if res.Order == nil || len(res.Order.Lines) != 1 {
		t.Fatalf("reservation %s: want an order with one line, got %+v", res.ID, res.Order)
	}
	return res.Order.Lines[0]
}

// codeName numbers test codes: codeName("GC", 7) = "GC-0007-ZQXW".
func codeName(prefix string, i int) string { return fmt.Sprintf("%s-%04d-ZQXW", prefix, i) }
