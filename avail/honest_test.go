package avail_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"inventory/avail"
	"inventory/domain"
	"inventory/events"
	"inventory/store"
	"inventory/testkit"
)

// gatedStream is the broker, with a gate in front of each new follow: while
// it is shut, a copy that has just installed a snapshot gets no events (as
// when the first fetch after a load is slow), so what it answers is the
// snapshot alone. cut ends the current follow, as a broker cutting the
// stream would: the copy reloads.
type gatedStream struct {
	*events.Broker

	mu     sync.Mutex
	gate   chan struct{} // closed: open
	cancel context.CancelFunc
}

func newGatedStream(br *events.Broker) *gatedStream {
	g := &gatedStream{Broker: br, gate: make(chan struct{})}
	close(g.gate)
	return g
}

func (g *gatedStream) FollowStockEvents(ctx context.Context, after *int64, sink domain.StockEventSink, done func(error)) {
	ctx, cancel := context.WithCancel(ctx)
	g.mu.Lock()
	gate := g.gate
	g.cancel = cancel
	g.mu.Unlock()
	go func() {
		select {
		case <-gate:
			g.Broker.FollowStockEvents(ctx, after, sink, done)
		case <-ctx.Done():
			done(ctx.Err())
			sink.Close()
		}
	}()
}

// shut makes the next follows wait until open.
func (g *gatedStream) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
}

func (g *gatedStream) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.gate:
	default:
		close(g.gate)
	}
}

// cut ends the current follow.
func (g *gatedStream) cut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cancel != nil {
		g.cancel()
	}
}

// snapshotStore is the real store whose snapshots a test can slow down
// or replace.
type snapshotStore struct {
	*store.Store
	mu sync.Mutex
	// after, if set, runs after each snapshot is read and before it is
	// returned; it may change it.
	after func(*domain.AvailabilitySnapshot)
}

func (s *snapshotStore) AvailabilitySnapshot(ctx context.Context) (domain.AvailabilitySnapshot, error) {
	snap, err := s.Store.AvailabilitySnapshot(ctx)
	s.mu.Lock()
	after := s.after
	s.mu.Unlock()
	if err == nil && after != nil {
		after(&snap)
	}
	return snap, err
}

func (s *snapshotStore) setAfter(f func(*domain.AvailabilitySnapshot)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.after = f
}

// startCopy runs a broker and a copy over st and stream until the test
// ends.
func (b *bundle) startCopy(t *testing.T, br *events.Broker, c *avail.Copy) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = br.Run(ctx) })
	wg.Go(func() { c.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// A load that takes longer than the bound (a big catalog, a slow link)
// hands the copy a snapshot already older than the bound: until the
// stream carries it past the changes committed since, it is as old as
// the snapshot, not as old as its install, and the database answers. Here
// a receipt commits just after the snapshot is read, the load returns
// twice the bound later, and no event reaches the copy until the test
// opens the stream: every answer the copy gives must include the receipt
// once it is older than the bound.
func TestCopyAgeCountsFromItsSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Catalog(t, domain.KindQuantity, []string{"AGE"}, "L")
	if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "AGE", Location: "L", Quantity: 10, Reference: testkit.Ref("PO")}); err != nil {
		t.Fatal(err)
	}
	const maxLag = 300 * time.Millisecond
	st := &snapshotStore{Store: b.Store}
	var committed time.Time // when the receipt's call returned: it committed before
	st.setAfter(func(*domain.AvailabilitySnapshot) {
		st.setAfter(nil) // the first load only
		if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "AGE", Location: "L", Quantity: 5, Reference: testkit.Ref("PO")}); err != nil {
			t.Error(err)
		}
		committed = time.Now()
		time.Sleep(2 * maxLag)
	})
	br := events.NewBroker(b.Store, b.Pool, events.Config{Tick: 10 * time.Millisecond}, b.logger)
	stream := newGatedStream(br)
	stream.shut()
	c := avail.New(st, stream, avail.Config{MaxLag: maxLag}, b.logger)
	b.startCopy(t, br, c)
	waitFor(t, 10*time.Second, "the copy to install its first load", func() bool { return c.Reloads() >= 1 })

	q := domain.AvailabilityQuery{SKUs: []string{"AGE"}}
	answered := 0
	for end := time.Now().Add(3 * maxLag); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		asked := time.Now()
		got, _, ok := c.Get(q)
		if !ok {
			continue
		}
		answered++
		if got[0].OnHand() != 15 && asked.Sub(committed) > maxLag {
			t.Fatalf("%v after the receipt committed (bound %v) the copy answered on hand %d, not 15, and says its lag is %v",
				asked.Sub(committed).Round(time.Millisecond), maxLag, got[0].OnHand(), c.Lag().Round(time.Millisecond))
		}
	}
	stream.open()
	waitFor(t, 10*time.Second, "the copy to answer with the receipt", func() bool {
		got, _, ok := c.Get(q)
		return ok && got[0].OnHand() == 15
	})
	t.Logf("while the stream was shut after a load that took %v, the copy answered %d times (all with the receipt)", 2*maxLag, answered)
}

// An instance never answers with an older seq than it already answered,
// even when a reload hands it an older snapshot (a standby that lags): the
// copy leaves the answers to the database until the stream has carried it
// past what it answered before. The older snapshot claims to be fresh, as
// a standby's own view of its unpublished events would.
func TestCopyNeverServesAnOlderSeq(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Catalog(t, domain.KindQuantity, []string{"BACK"}, "L")
	if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "BACK", Location: "L", Quantity: 10, Reference: testkit.Ref("PO")}); err != nil {
		t.Fatal(err)
	}
	st := &snapshotStore{Store: b.Store}
	var first domain.AvailabilitySnapshot
	st.setAfter(func(s *domain.AvailabilitySnapshot) { first = *s; st.setAfter(nil) })
	br := events.NewBroker(b.Store, b.Pool, events.Config{Tick: 10 * time.Millisecond}, b.logger)
	stream := newGatedStream(br)
	c := avail.New(st, stream, avail.Config{MaxLag: time.Second}, b.logger)
	b.startCopy(t, br, c)
	q := domain.AvailabilityQuery{SKUs: []string{"BACK"}}
	waitFor(t, 10*time.Second, "the copy to answer", func() bool { _, _, ok := c.Get(q); return ok })
	for range 3 {
		if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "BACK", Location: "L", Quantity: 1, Reference: testkit.Ref("PO")}); err != nil {
			t.Fatal(err)
		}
	}
	var served int64
	waitFor(t, 10*time.Second, "the copy to answer the receipts", func() bool {
		got, seq, ok := c.Get(q)
		served = seq
		return ok && got[0].OnHand() == 13
	})
	if first.Seq >= served {
		t.Fatalf("the first snapshot is at seq %d, the copy answered seq %d", first.Seq, served)
	}

	// The next load is the first snapshot again, claiming to be fresh.
	st.setAfter(func(s *domain.AvailabilitySnapshot) {
		old := first
		old.Lag, old.At = 0, time.Now()
		*s = old
	})
	stream.shut()
	loads := c.Reloads()
	stream.cut()
	waitFor(t, 10*time.Second, "the copy to reload", func() bool { return c.Reloads() > loads })
	answered := 0
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		got, seq, ok := c.Get(q)
		if !ok {
			continue
		}
		answered++
		if seq < served || got[0].OnHand() != 13 {
			t.Fatalf("after answering seq %d (on hand 13) the copy answered seq %d (on hand %d): it went backwards", served, seq, got[0].OnHand())
		}
	}
	st.setAfter(nil)
	stream.open()
	waitFor(t, 10*time.Second, "the copy to answer again", func() bool {
		got, seq, ok := c.Get(q)
		return ok && seq >= served && got[0].OnHand() == 13
	})
	t.Logf("after an older snapshot (seq %d, having answered seq %d) the copy answered %d times before the stream carried it on", first.Seq, served, answered)
}
