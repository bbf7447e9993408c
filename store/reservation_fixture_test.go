package store_test

import (
	"testing"

	"inventory/domain"
)

// stock creates locations and QUANTITY SKUs as needed and receives stock:
// stock(t, b, "SKU", "LOC", 5).
func (b *testBundle) stock(t *testing.T, sku, location string, onHand int) {
	t.Helper()
	if _, err := b.store.LocationCreate(b.ctx, domain.CreateLocationInput{Code: location, Name: location}); err != nil {
		if e, ok := domain.AsError(err); !ok || e.Code != domain.CodeAlreadyExists {
			t.Fatal(err)
		}
	}
	if _, err := b.store.SKUCreate(b.ctx, domain.CreateSKUInput{Code: sku, Name: sku, Kind: domain.KindQuantity}); err != nil {
		if e, ok := domain.AsError(err); !ok || e.Code != domain.CodeAlreadyExists {
			t.Fatal(err)
		}
	}
	if onHand > 0 {
		if _, err := b.store.StockReceive(b.ctx, domain.ReceiveStockInput{SKU: sku, Location: location, Quantity: onHand, Reference: "test"}); err != nil {
			t.Fatal(err)
		}
	}
}

// reserve makes a one-line reservation and fails the test on any error.
func (b *testBundle) reserve(t *testing.T, checkout, key, sku string, location *string, q, ttl int) domain.Reservation {
	t.Helper()
	res, _, err := b.store.ReservationCreate(b.ctx, domain.ReserveInput{CheckoutID: checkout, RequestKey: key, TTLSeconds: ttl,
		Lines: []domain.ReserveLine{{SKU: sku, Location: location, Quantity: q}}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// balance reads on_hand and reserved of one balance in SQL.
func (b *testBundle) balance(t *testing.T, sku, location string) (onHand, reserved int) {
	t.Helper()
	err := b.pool.QueryRow(b.ctx, `SELECT on_hand, reserved FROM balances b JOIN skus s ON s.id = b.sku_id JOIN locations l ON l.id = b.location_id
		WHERE s.code = $1 AND l.code = $2`, sku, location).Scan(&onHand, &reserved)
	if err != nil {
		t.Fatal(err)
	}
	return onHand, reserved
}

// requireInvariants checks, in SQL, what must hold after any workload: reserved
// equals the held lines, every column equals its ledger, nothing is negative.
func (b *testBundle) requireInvariants(t *testing.T) {
	t.Helper()
	var bad int
	err := b.pool.QueryRow(b.ctx, `
		SELECT count(*) FROM balances bal
		WHERE bal.reserved <> coalesce((SELECT sum(rl.quantity - rl.preorder_quantity) FROM reservation_lines rl JOIN reservations r ON r.id = rl.reservation_id
		                                WHERE r.status = 'held' AND rl.sku_id = bal.sku_id AND rl.location_id = bal.location_id), 0)
		   OR bal.on_hand <> coalesce((SELECT sum(on_hand_delta) FROM stock_movements m WHERE m.sku_id = bal.sku_id AND m.location_id = bal.location_id), 0)
		   OR bal.reserved <> coalesce((SELECT sum(reserved_delta) FROM stock_movements m WHERE m.sku_id = bal.sku_id AND m.location_id = bal.location_id), 0)
		   OR bal.on_hand < 0 OR bal.reserved < 0 OR bal.reserved > bal.on_hand`).Scan(&bad)
	if err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Fatalf("%d balances break an invariant", bad)
	}
	issues, err := b.store.Reconciliation(b.ctx)
	if err != nil || len(issues) != 0 {
		t.Fatalf("reconciliation: %+v %v", issues, err)
	}
}

func ptr[T any](v T) *T { return &v }
