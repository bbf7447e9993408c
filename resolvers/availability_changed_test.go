package resolvers

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"inventory/domain"
	"inventory/events"
	"inventory/pgtest"
	"inventory/testkit"
)

// TestAvailabilityChangesSlowReaderIsNotCutOff: a reader that stops
// reading for longer than the broker's stall timeout, with a one-event
// buffer, while 300 reserves happen, is not cut off: when it reads again
// its next message is the latest value (no backlog), and the broker stalled
// no one. A stockChanged subscriber on the same broker that stops reading
// is cut off (the limit this subscription must not hit).
func TestAvailabilityChangesSlowReaderIsNotCutOff(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(domain.WithActor(context.Background(), domain.Actor{Role: domain.RoleAdmin, Name: "test-admin"}))
	defer cancel()
	pool := pgtest.NewPool(t)
	st := testkit.NewStore(t, pool)
	if _, err := st.LocationCreate(ctx, domain.CreateLocationInput{Code: "AMS", Name: "Amsterdam"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SKUCreate(ctx, domain.CreateSKUInput{Code: "SLOW", Name: "Slow", Kind: domain.KindQuantity}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StockReceive(ctx, domain.ReceiveStockInput{SKU: "SLOW", Location: "AMS", Quantity: 1000, Reference: "PO"}); err != nil {
		t.Fatal(err)
	}
	const stall = 200 * time.Millisecond
	broker := events.NewBroker(st, pool, events.Config{Tick: 10 * time.Millisecond, Buffer: 1, StallTimeout: stall}, slog.New(slog.DiscardHandler))
	var running sync.WaitGroup
	running.Go(func() { _ = broker.Run(ctx) })
	defer running.Wait()
	defer cancel()

	r := &Resolver{Live: st, Broker: broker, PushInterval: 20 * time.Millisecond}
	q := domain.AvailabilityQuery{SKUs: []string{"SLOW"}}
	slow, err := r.availabilityChanges(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if first := <-slow; first.Available() != 1000 {
		t.Fatalf("first value: %d available", first.Available())
	}
	match, _ := stockFilter(nil, nil)
	stock := subscribe(ctx, broker, nil, match) // never read

	for i := range 300 {
		if _, _, err := st.ReservationCreate(ctx, domain.ReserveInput{CheckoutID: fmt.Sprint("c", i), RequestKey: "k", TTLSeconds: 600,
			Lines: []domain.ReserveLine{{SKU: "SLOW", Quantity: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * stall) // past the stall timeout, and a few push intervals after the last change
	select {
	case a, open := <-slow:
		if !open {
			t.Fatal("the slow availabilityChanged reader was cut off")
		}
		if a.Available() != 700 {
			t.Fatalf("after catching up the next value has %d available, want the latest, 700", a.Available())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("nothing after catching up")
	}
	waitFor := time.Now().Add(5 * time.Second)
	for broker.Stalled() == 0 && time.Now().Before(waitFor) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := broker.Stalled(); n != 1 {
		t.Fatalf("broker stalled %d subscribers, want 1 (the unread stockChanged one)", n)
	}
	for range stock { // cut off: closed
	}
}
