package events_test

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"inventory/domain"
	"inventory/testkit"
)

// workload is concurrent writers changing balances through the store:
// receives, adjustments (up and down), reservations and their releases,
// over a few SKUs and locations.
type workload struct {
	b         *testBundle
	skus      []string
	locations []string
	calls     atomic.Int64 // store calls that changed a balance
}

// newWorkload creates the SKUs and locations and stocks every balance.
func newWorkload(t *testing.T, b *testBundle, prefix string, skus, locations int) *workload {
	t.Helper()
	w := &workload{b: b}
	for i := range skus {
		w.skus = append(w.skus, fmt.Sprintf("%s-S%d", prefix, i))
	}
	for i := range locations {
		w.locations = append(w.locations, fmt.Sprintf("%s-L%d", prefix, i))
	}
	b.Catalog(t, domain.KindQuantity, w.skus, w.locations...)
	for _, s := range w.skus {
		for _, l := range w.locations {
			b.receive(t, s, l, 40)
			w.calls.Add(1)
		}
	}
	return w
}

// run has writers goroutines make perWriter store calls each and fails the
// test on any error other than the expected refusals (OUT_OF_STOCK,
// BELOW_RESERVED).
func (w *workload) run(t *testing.T, writers, perWriter int, seed uint64) {
	t.Helper()
	testkit.Writers(t, writers, func(g int) error { return w.writer(g, perWriter, seed) })
}

func (w *workload) writer(g, n int, seed uint64) error {
	b := w.b
	rng := rand.New(rand.NewPCG(seed, uint64(g)))
	var held []string
	for i := range n {
		sku := w.skus[rng.IntN(len(w.skus))]
		loc := w.locations[rng.IntN(len(w.locations))]
		var err error
		switch op := rng.IntN(10); {
		case op < 3:
			_, err = b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: sku, Location: loc, Quantity: 1 + rng.IntN(3), Reference: testkit.Ref("PO")})
		case op < 5:
			delta := 1 + rng.IntN(2)
			if op == 4 {
				delta = -delta
			}
			_, err = b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: sku, Location: loc, Delta: delta, Reason: "count", Reference: testkit.Ref("C")})
		case op < 8 || len(held) == 0:
			var res domain.Reservation
			res, _, err = b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{
				CheckoutID: fmt.Sprintf("cart-%d-%d", seed, g), RequestKey: fmt.Sprintf("k%d", i), TTLSeconds: 600,
				Lines: []domain.ReserveLine{{SKU: sku, Location: &loc, Quantity: 1 + rng.IntN(2)}}})
			if err == nil {
				held = append(held, res.ID)
			}
		default:
			k := rng.IntN(len(held))
			id := held[k]
			held = append(held[:k], held[k+1:]...)
			_, err = b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: id, Reason: domain.ReasonCustomerCancelled})
		}
		if e, ok := domain.AsError(err); ok && (e.Code == domain.CodeOutOfStock || e.Code == domain.CodeBelowReserved) {
			continue
		}
		if err != nil {
			return fmt.Errorf("writer %d, call %d: %w", g, i, err)
		}
		w.calls.Add(1)
	}
	return nil
}

// balances returns every balance's on_hand and reserved by "sku@location".
func (b *testBundle) balances(t *testing.T) map[string][2]int {
	t.Helper()
	rows, err := b.Pool.Query(b.Ctx, `
		SELECT s.code || '@' || l.code, b.on_hand, b.reserved
		FROM balances b JOIN skus s ON s.id = b.sku_id JOIN locations l ON l.id = b.location_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][2]int{}
	for rows.Next() {
		var k string
		var onHand, reserved int
		if err := rows.Scan(&k, &onHand, &reserved); err != nil {
			t.Fatal(err)
		}
		out[k] = [2]int{onHand, reserved}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// requireLastIsBalance fails unless the last of evs for each balance is the
// balance as it is in the table, and every balance has an event.
func requireLastIsBalance(t *testing.T, b *testBundle, what string, evs []domain.StockEvent) {
	t.Helper()
	last := map[string][2]int{}
	for _, e := range evs {
		last[e.SKU+"@"+e.Location] = [2]int{e.OnHand, e.Reserved}
	}
	table := b.balances(t)
	if len(last) != len(table) {
		t.Fatalf("%s: events for %d balances, the table has %d", what, len(last), len(table))
	}
	for k, want := range table {
		if got, ok := last[k]; !ok || got != want {
			t.Fatalf("%s: the last event of %s says (on_hand, reserved) = %v, the balance row is %v", what, k, got, want)
		}
	}
}
