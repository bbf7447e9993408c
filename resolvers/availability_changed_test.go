package resolvers

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
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
	stock := subscribe(ctx, broker, nil, match, stockEventTag) // never read

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

// countingSource counts availability reads on a real store.
type countingSource struct {
	AvailabilitySource
	reads atomic.Int64
}

func (c *countingSource) AvailabilityList(ctx context.Context, q domain.AvailabilityQuery) ([]*domain.Availability, error) {
	c.reads.Add(1)
	return c.AvailabilitySource.AvailabilityList(ctx, q)
}

// TestAvailabilityChangesShareReads: 200 subscriptions watching one hot
// SKU cost one database read per push interval between them, not one each
// (10,000 product pages of a drop would otherwise be 40,000 reads a
// second), and every one of them ends on the latest value.
func TestAvailabilityChangesShareReads(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(domain.WithActor(context.Background(), domain.Actor{Role: domain.RoleAdmin, Name: "test-admin"}))
	defer cancel()
	pool := pgtest.NewPool(t)
	st := testkit.NewStore(t, pool)
	if _, err := st.LocationCreate(ctx, domain.CreateLocationInput{Code: "AMS", Name: "Amsterdam"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SKUCreate(ctx, domain.CreateSKUInput{Code: "HOT", Name: "Hot", Kind: domain.KindQuantity}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StockReceive(ctx, domain.ReceiveStockInput{SKU: "HOT", Location: "AMS", Quantity: 1000, Reference: "PO"}); err != nil {
		t.Fatal(err)
	}
	broker := events.NewBroker(st, pool, events.Config{Tick: 10 * time.Millisecond}, slog.New(slog.DiscardHandler))
	var running sync.WaitGroup
	running.Go(func() { _ = broker.Run(ctx) })
	defer running.Wait()
	defer cancel()

	const subscribers, interval = 200, 50 * time.Millisecond
	src := &countingSource{AvailabilitySource: st}
	r := &Resolver{Live: src, Broker: broker, PushInterval: interval}
	var readers, firsts sync.WaitGroup
	last := make([]atomic.Int64, subscribers)
	var delaysMu sync.Mutex
	var delays []time.Duration // after its tick (a multiple of interval), of every update but the first
	for i := range subscribers {
		ch, err := r.availabilityChanges(ctx, domain.AvailabilityQuery{SKUs: []string{"HOT"}})
		if err != nil {
			t.Fatal(err)
		}
		firsts.Add(1)
		readers.Go(func() {
			<-ch // the first value: sent at once, not at a tick
			firsts.Done()
			for a := range ch {
				last[i].Store(int64(a.Available()))
				at := time.Now()
				delaysMu.Lock()
				delays = append(delays, at.Sub(at.Truncate(interval)))
				delaysMu.Unlock()
			}
		})
	}
	// Counting starts once every subscriber has its first value: those
	// reads (at subscribe, not at a tick) may still be running on a loaded
	// machine when the last subscribe returns.
	firsts.Wait()
	before := src.reads.Load()
	start := time.Now()
	for i := range 200 {
		if _, _, err := st.ReservationCreate(ctx, domain.ReserveInput{CheckoutID: fmt.Sprint("c", i), RequestKey: "k", TTLSeconds: 600,
			Lines: []domain.ReserveLine{{SKU: "HOT", Quantity: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	// The event stream may lag the writes: wait for every subscriber to
	// show the latest value.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(interval) {
		behind := 0
		for i := range last {
			if last[i].Load() != 800 {
				behind++
			}
		}
		if behind == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d subscribers do not show the latest value (800 available)", behind)
		}
	}
	elapsed := time.Since(start)
	reads := src.reads.Load() - before
	cancel()
	readers.Wait()
	slices.Sort(delays)
	t.Logf("tick to delivery over %d updates: p50 %s, p99 %s, max %s", len(delays), delays[len(delays)/2], delays[len(delays)*99/100], delays[len(delays)-1])
	ticks := int64(elapsed/interval) + 1
	t.Logf("%d subscribers, 200 reserves over %s: %d availability reads (%d push intervals)", subscribers, elapsed.Round(time.Millisecond), reads, ticks)
	if reads > 2*ticks {
		t.Fatalf("%d reads in %d push intervals for %d subscribers of one SKU, want at most %d", reads, ticks, subscribers, 2*ticks)
	}
}

// TestNextTickIsAligned: ticks fall on multiples of the interval, between
// half an interval and one and a half intervals away.
func TestNextTickIsAligned(t *testing.T) {
	t.Parallel()
	const interval = 250 * time.Millisecond
	for range 100 {
		d := nextTick(interval)
		at := time.Now().Add(d)
		if d < interval/2 || d > 3*interval/2 {
			t.Fatalf("next tick in %s, want between %s and %s", d, interval/2, 3*interval/2)
		}
		if off := at.Sub(at.Truncate(interval)); off > 5*time.Millisecond && off < interval-5*time.Millisecond {
			t.Fatalf("next tick %s past a multiple of %s", off, interval)
		}
		time.Sleep(time.Millisecond)
	}
}
