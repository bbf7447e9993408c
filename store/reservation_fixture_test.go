package store_test

import (
	"testing"

	"inventory/domain"
)

// reserve makes a one-line reservation and fails the test on any error.
func (b *testBundle) reserve(t *testing.T, checkout, key, sku string, location *string, q, ttl int) domain.Reservation {
	t.Helper()
	res, _, err := b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: checkout, RequestKey: key, TTLSeconds: ttl,
		Lines: []domain.ReserveLine{{SKU: sku, Location: location, Quantity: q}}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// requireInvariants checks, in SQL, what must hold after any workload: reserved
// equals the held lines, every column equals its ledger, nothing is negative.
func (b *testBundle) requireInvariants(t *testing.T) {
	t.Helper()
	var bad int
	err := b.Pool.QueryRow(b.Ctx, `
		SELECT count(*) FROM balances bal
		WHERE bal.reserved <> coalesce((SELECT sum(rl.quantity - rl.preorder_quantity) FROM reservation_lines rl JOIN reservations r ON r.id = rl.reservation_id
		                                WHERE r.status = 'held' AND rl.sku_id = bal.sku_id AND rl.location_id = bal.location_id), 0)
		   OR bal.on_hand <> coalesce((SELECT sum(on_hand_delta) FROM stock_movements m WHERE m.sku_id = bal.sku_id AND m.location_id = bal.location_id), 0)
		   OR bal.reserved <> coalesce((SELECT sum(reserved_delta) FROM stock_movements m WHERE m.sku_id = bal.sku_id AND m.location_id = bal.location_id), 0)
		   OR bal.committed <> coalesce((SELECT sum(committed_delta) FROM stock_movements m WHERE m.sku_id = bal.sku_id AND m.location_id = bal.location_id), 0)
		   OR bal.on_hand < 0 OR bal.reserved < 0 OR bal.committed < 0 OR bal.reserved + bal.committed > bal.on_hand`).Scan(&bad)
	if err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Fatalf("%d balances break an invariant", bad)
	}
	issues, err := b.Store.Reconciliation(b.Ctx)
	if err != nil || len(issues) != 0 {
		t.Fatalf("reconciliation: %+v %v", issues, err)
	}
}

func ptr[T any](v T) *T { return &v }
