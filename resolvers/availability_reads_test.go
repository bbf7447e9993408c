package resolvers

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inventory/avail"
	"inventory/domain"
	"inventory/events"
	"inventory/pgtest"
	"inventory/store"
	"inventory/testkit"
)

// liveSetup is a real store with locations AMS and BER, the given SKUs
// stocked with 1000 at each, and a running broker.
type liveSetup struct {
	ctx    context.Context
	st     *store.Store
	broker *events.Broker
}

func setupLive(t *testing.T, skus ...string) liveSetup {
	t.Helper()
	ctx, cancel := context.WithCancel(domain.WithActor(context.Background(), domain.Actor{Role: domain.RoleAdmin, Name: "test-admin"}))
	pool := pgtest.NewPool(t)
	st := testkit.NewStore(t, pool)
	for _, l := range []string{"AMS", "BER"} {
		if _, err := st.LocationCreate(ctx, domain.CreateLocationInput{Code: l, Name: l}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range skus {
		if _, err := st.SKUCreate(ctx, domain.CreateSKUInput{Code: s, Name: s, Kind: domain.KindQuantity}); err != nil {
			t.Fatal(err)
		}
		for _, l := range []string{"AMS", "BER"} {
			if _, err := st.StockReceive(ctx, domain.ReceiveStockInput{SKU: s, Location: l, Quantity: 1000, Reference: "PO-" + l}); err != nil {
				t.Fatal(err)
			}
		}
	}
	broker := events.NewBroker(st, pool, events.Config{Tick: 10 * time.Millisecond}, slog.New(slog.DiscardHandler))
	var running sync.WaitGroup
	running.Go(func() { _ = broker.Run(ctx) })
	t.Cleanup(func() { cancel(); running.Wait() })
	return liveSetup{ctx: ctx, st: st, broker: broker}
}

// reserveAll reserves one unit of each SKU at each location, n times.
func (s liveSetup) reserveAll(t *testing.T, n int, skus ...string) {
	t.Helper()
	for i := range n {
		var lines []domain.ReserveLine
		ams, ber := "AMS", "BER"
		for _, k := range skus {
			lines = append(lines, domain.ReserveLine{SKU: k, Location: &ams, Quantity: 1}, domain.ReserveLine{SKU: k, Location: &ber, Quantity: 1})
		}
		if _, _, err := s.st.ReservationCreate(s.ctx, domain.ReserveInput{CheckoutID: fmt.Sprint("c", i), RequestKey: "k", TTLSeconds: 600, Lines: lines}); err != nil {
			t.Fatal(err)
		}
	}
}

// watchers subscribes once per query and follows each SKU's available
// count, failing the test if one ever goes up (reserves only take units:
// a value that goes up followed a newer one).
type watchers struct {
	t       *testing.T
	mu      sync.Mutex
	last    []map[string]int
	readers sync.WaitGroup
}

func watch(t *testing.T, r *Resolver, ctx context.Context, queries []domain.AvailabilityQuery) *watchers {
	t.Helper()
	w := &watchers{t: t, last: make([]map[string]int, len(queries))}
	var firsts sync.WaitGroup
	for i, q := range queries {
		ch, err := r.availabilityChanges(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		w.last[i] = map[string]int{}
		firsts.Add(len(q.SKUs))
		w.readers.Go(func() {
			seen := 0
			for a := range ch {
				w.mu.Lock()
				if prev, ok := w.last[i][a.SKU]; ok && a.Available() > prev {
					t.Errorf("subscriber %d: %s went from %d to %d available", i, a.SKU, prev, a.Available())
				}
				w.last[i][a.SKU] = a.Available()
				w.mu.Unlock()
				if seen < len(q.SKUs) {
					seen++
					firsts.Done()
				}
			}
		})
	}
	firsts.Wait()
	return w
}

// waitAll waits until every subscriber shows want for every SKU it watches.
func (w *watchers) waitAll(want int) {
	w.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		behind := 0
		w.mu.Lock()
		for _, m := range w.last {
			for _, v := range m {
				if v != want {
					behind++
				}
			}
		}
		w.mu.Unlock()
		if behind == 0 {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%d subscribed values do not show the latest (%d available)", behind, want)
		}
	}
}

// inFlightSource counts availability reads on a real store and the most
// that ran at once.
type inFlightSource struct {
	AvailabilitySource
	reads, now, most atomic.Int64
}

func (c *inFlightSource) AvailabilityList(ctx context.Context, q domain.AvailabilityQuery) ([]*domain.Availability, error) {
	c.reads.Add(1)
	n := c.now.Add(1)
	defer c.now.Add(-1)
	for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
	}
	time.Sleep(2 * time.Millisecond) // a read takes a while: overlaps are seen
	return c.AvailabilitySource.AvailabilityList(ctx, q)
}

// TestAvailabilityChangesReadsAreCanonical: subscriptions asking for the
// same SKUs and locations in another order, or with a location twice, share
// their reads. Keyed by the caller's order, 120 subscribers over the 6
// orders of 3 SKUs (and 2 spellings of 2 locations) made up to 12 reads a
// push interval where 1 is enough. Values never go backwards.
func TestAvailabilityChangesReadsAreCanonical(t *testing.T) {
	t.Parallel()
	skus := []string{"A", "B", "C"}
	s := setupLive(t, skus...)
	const interval = 50 * time.Millisecond
	src := &inFlightSource{AvailabilitySource: s.st}
	r := &Resolver{Live: src, Broker: s.broker, PushInterval: interval}
	orders := [][]string{{"A", "B", "C"}, {"A", "C", "B"}, {"B", "A", "C"}, {"B", "C", "A"}, {"C", "A", "B"}, {"C", "B", "A"}}
	locations := [][]string{{"AMS", "BER"}, {"BER", "AMS", "AMS"}}
	var queries []domain.AvailabilityQuery
	for i := range 120 {
		queries = append(queries, domain.AvailabilityQuery{SKUs: orders[i%6], Locations: locations[i%2]})
	}
	w := watch(t, r, s.ctx, queries)
	before := src.reads.Load()
	start := time.Now()
	s.reserveAll(t, 100, skus...)
	w.waitAll(1800)
	reads, ticks := src.reads.Load()-before, int64(time.Since(start)/interval)+1
	t.Logf("120 subscribers over 12 spellings of one question, 100 baskets: %d reads in %d push intervals", reads, ticks)
	if reads > 2*ticks {
		t.Fatalf("%d reads in %d push intervals, want at most %d (one shared read a tick)", reads, ticks, 2*ticks)
	}
}

// slots is a ReadShare of n slots.
type slots chan struct{}

func (s slots) Acquire(ctx context.Context) (func(), error) {
	select {
	case s <- struct{}{}:
		return func() { <-s }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestAvailabilityChangesReadThroughShare: availabilityChanged's database
// reads (each subscription's first values and the shared reads at each
// tick) take a slot of the anonymous share, so 60 subscriptions over 30
// distinct SKU sets never hold more connections at once than the share
// has (here 1), where they used the checkout pool outside it; every one
// still ends on the latest values.
func TestAvailabilityChangesReadThroughShare(t *testing.T) {
	t.Parallel()
	var skus []string
	for i := range 30 {
		skus = append(skus, fmt.Sprint("S", i))
	}
	s := setupLive(t, skus...)
	src := &inFlightSource{AvailabilitySource: s.st}
	r := &Resolver{Live: src, LiveShare: make(slots, 1), Broker: s.broker, PushInterval: 20 * time.Millisecond}
	var queries []domain.AvailabilityQuery
	for i := range 60 {
		queries = append(queries, domain.AvailabilityQuery{SKUs: []string{skus[i%30]}})
	}
	w := watch(t, r, s.ctx, queries)
	s.reserveAll(t, 20, skus...)
	w.waitAll(1960)
	t.Logf("60 subscriptions over 30 SKUs: %d reads, at most %d at once", src.reads.Load(), src.most.Load())
	if m := src.most.Load(); m > 1 {
		t.Fatalf("%d availabilityChanged reads ran at once on a share of 1", m)
	}
}

// TestAvailabilityChangesFromMemory: with the instance's in-memory copy
// fresh, 100 subscriptions to one SKU get their first values and every
// update from it: no database read at all, where each tick was a read on
// the pool. Every subscriber ends on the latest value and none ever sees
// one go backwards.
func TestAvailabilityChangesFromMemory(t *testing.T) {
	t.Parallel()
	s := setupLive(t, "HOT")
	mem := avail.New(s.st, s.broker, avail.Config{MaxLag: 10 * time.Second}, slog.New(slog.DiscardHandler))
	go mem.Run(s.ctx)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, _, ok := mem.Get(domain.AvailabilityQuery{SKUs: []string{"HOT"}}); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the copy did not load")
		}
	}
	src := &inFlightSource{AvailabilitySource: s.st}
	// A subscription waits maxMemoryBehind ticks for the copy before it
	// reads the database: at 250 ms, a second, which a copy that keeps up
	// meets even on a loaded machine (at 20 ms, 80 ms was missed in CI).
	r := &Resolver{Live: src, LiveMemory: mem, Broker: s.broker, PushInterval: 250 * time.Millisecond}
	var queries []domain.AvailabilityQuery
	for range 100 {
		queries = append(queries, domain.AvailabilityQuery{SKUs: []string{"HOT"}})
	}
	w := watch(t, r, s.ctx, queries)
	s.reserveAll(t, 100, "HOT")
	w.waitAll(1800)
	t.Logf("100 subscriptions, 100 baskets: %d database reads, %d answers from memory", src.reads.Load(), mem.Hits())
	if n := src.reads.Load(); n != 0 {
		t.Fatalf("%d database reads with a fresh copy", n)
	}
}
