package resolvers

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"inventory/domain"
	"inventory/pgtest"
	"inventory/store"
	"inventory/testkit"
)

// countingReservations counts reads of single reservations on a real store.
type countingReservations struct {
	*store.Store
	reads atomic.Int64
}

func (c *countingReservations) ReservationGetByID(ctx context.Context, scope domain.Scope, id string) (*domain.Reservation, error) {
	c.reads.Add(1)
	return c.Store.ReservationGetByID(ctx, scope, id)
}

// TestReservationChangesReadOncePerMessage: a checkout's reservationChanged
// filter reads the database once per message it sends (a status change),
// not once per event: other checkouts' events, the further events of a
// basket's transition (one per line) and events that change no status cost
// no read.
func TestReservationChangesReadOncePerMessage(t *testing.T) {
	t.Parallel()
	ctx := domain.WithActor(context.Background(), domain.Actor{Role: domain.RoleAdmin, Name: "test-admin"})
	st := testkit.NewStore(t, pgtest.NewPool(t))
	if _, err := st.LocationCreate(ctx, domain.CreateLocationInput{Code: "AMS", Name: "Amsterdam"}); err != nil {
		t.Fatal(err)
	}
	ams := "AMS"
	var lines []domain.ReserveLine
	for i := range 3 {
		sku := fmt.Sprintf("S%d", i)
		if _, err := st.SKUCreate(ctx, domain.CreateSKUInput{Code: sku, Name: sku, Kind: domain.KindQuantity}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.StockReceive(ctx, domain.ReceiveStockInput{SKU: sku, Location: ams, Quantity: 50, Reference: "PO-" + sku}); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, domain.ReserveLine{SKU: sku, Location: &ams, Quantity: 1})
	}
	mine, _, err := st.ReservationCreate(ctx, domain.ReserveInput{CheckoutID: "mine", RequestKey: "k", TTLSeconds: 600, Lines: lines})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 { // someone else's holds: never read
		if _, _, err := st.ReservationCreate(ctx, domain.ReserveInput{CheckoutID: fmt.Sprintf("other-%d", i), RequestKey: "k", TTLSeconds: 600, Lines: lines[:1]}); err != nil {
			t.Fatal(err)
		}
	}
	counting := &countingReservations{Store: st}
	filter := (&Resolver{Reservations: counting}).reservationChanges("mine")
	var sent []domain.ReservationStatus
	var cursor int64
	seen := 0
	// deliver feeds the subscriber what was published since the last call,
	// as the broker would.
	deliver := func() {
		t.Helper()
		if _, err := st.StockEventsPublish(ctx, 1000); err != nil {
			t.Fatal(err)
		}
		events, err := st.StockEventsAfter(ctx, cursor, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			cursor, seen = e.Seq, seen+1
			res, ok, err := filter(ctx, e)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				sent = append(sent, res.Status)
			}
		}
	}
	deliver()
	if _, err := st.ReservationConfirm(ctx, domain.Scope{}, domain.ConfirmInput{ID: mine.ID, OrderRef: "ORD-1"}); err != nil {
		t.Fatal(err)
	}
	deliver()
	// 3 received + 3 reserved + 10 others' + 3 confirmed events.
	if seen != 19 {
		t.Fatalf("%d events, want 19", seen)
	}
	if fmt.Sprint(sent) != "[HELD CONFIRMED]" {
		t.Fatalf("sent %v, want [HELD CONFIRMED]", sent)
	}
	if n := counting.reads.Load(); n != 2 {
		t.Fatalf("%d reservation reads for %d events and 2 messages; want 2", n, seen)
	}
}
