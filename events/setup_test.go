package events_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"inventory/domain"
	"inventory/events"
	"inventory/testkit"
)

// testBundle is what the broker tests need: a store on a database of its
// own, a context acting as an admin, and a logger whose output the test reads.
type testBundle struct {
	testkit.Kit
	logs   *testkit.LogBuffer
	logger *slog.Logger
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	kit := testkit.New(t, "test")
	logs, logger := testkit.TestLogger(t)
	return &testBundle{Kit: kit, logs: logs, logger: logger}
}

// startBroker runs a broker on st until stop is called or the test ends.
// stop cancels Run, fails the test unless Run returns nil within 10 s, and
// fails it if the broker logged an error or warning meanwhile.
func (b *testBundle) startBroker(t *testing.T, st events.Store, cfg events.Config) (*events.Broker, func()) {
	t.Helper()
	br := events.NewBroker(st, b.Pool, cfg, b.logger)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- br.Run(ctx) }()
	var once sync.Once
	stop := func() {
		t.Helper()
		once.Do(func() {
			cancel()
			select {
			case err := <-ran:
				if err != nil {
					t.Errorf("Broker.Run returned %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("Broker.Run did not return within 10s of its context ending")
			}
			if log := b.logs.String(); strings.Contains(log, "level=ERROR") || strings.Contains(log, "level=WARN") {
				t.Errorf("the broker logged errors:\n%s", log)
			}
		})
	}
	t.Cleanup(stop) // runs before the pool closes and the database is dropped
	return br, stop
}

func (b *testBundle) receive(t *testing.T, sku, loc string, q int) {
	t.Helper()
	if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: sku, Location: loc, Quantity: q, Reference: testkit.Ref("PO")}); err != nil {
		t.Fatalf("StockReceive(%s@%s, %d): %v", sku, loc, q, err)
	}
}

// receiveMany makes n balance changes (receives of one unit) spread over
// skus at loc, one after another.
func (b *testBundle) receiveMany(t *testing.T, n int, loc string, skus ...string) {
	t.Helper()
	for i := range n {
		b.receive(t, skus[i%len(skus)], loc, 1)
	}
}

// eventCounts returns how many stock events exist and how many of them the
// relay has not published yet.
func (b *testBundle) eventCounts(t *testing.T) (total, unpublished int64) {
	t.Helper()
	if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*), count(*) FILTER (WHERE seq IS NULL) FROM stock_events`).Scan(&total, &unpublished); err != nil {
		t.Fatalf("counting stock events: %v", err)
	}
	return total, unpublished
}

// waitPublished waits until the running broker's relay has published every
// event and returns their number, which is then also the newest seq.
func (b *testBundle) waitPublished(t *testing.T) int64 {
	t.Helper()
	var total, unpublished int64
	waitFor(t, 20*time.Second, "the relay to publish every event", func() bool {
		total, unpublished = b.eventCounts(t)
		return unpublished == 0
	})
	if latest, err := b.Store.StockEventsLatest(b.Ctx); err != nil || latest != total {
		t.Fatalf("%d events published, but the newest seq is %d (%v)", total, latest, err)
	}
	return total
}

// waitFor calls cond every 10 ms until it returns true and fails the test,
// saying what, if that has not happened within timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// passAll is a convert that delivers every event as it is.
func passAll(_ context.Context, e domain.StockEvent) (domain.StockEvent, bool, error) {
	return e, true, nil
}

// onlySKU is a convert that delivers only sku's events.
func onlySKU(sku string) func(context.Context, domain.StockEvent) (domain.StockEvent, bool, error) {
	return func(_ context.Context, e domain.StockEvent) (domain.StockEvent, bool, error) {
		return e, e.SKU == sku, nil
	}
}

// subscriber is one Broker.SubscribeStockEvents call and what came of it.
type subscriber struct {
	name   string
	ch     chan domain.StockEvent
	cancel context.CancelFunc
	ended  chan struct{} // closed when done was called
	err    error         // what done got; read after ended
	closed chan struct{} // closed when the reader saw ch closed (only if reading)

	mu          sync.Mutex
	got         []domain.StockEvent
	closedEarly bool // ch was closed before done had been called
	doneCalls   int
}

// subscribe subscribes to br with a channel of capacity buffer. When read
// is true a goroutine takes every event off the channel as it arrives;
// otherwise nobody reads it.
func subscribe(t *testing.T, br *events.Broker, name string, after *int64, convert func(context.Context, domain.StockEvent) (domain.StockEvent, bool, error), buffer int, read bool) *subscriber {
	t.Helper()
	return subscribeCtx(t, context.Background(), br, name, after, convert, buffer, read)
}

func subscribeCtx(t *testing.T, parent context.Context, br *events.Broker, name string, after *int64, convert func(context.Context, domain.StockEvent) (domain.StockEvent, bool, error), buffer int, read bool) *subscriber {
	t.Helper()
	ctx, cancel := context.WithCancel(parent)
	s := &subscriber{name: name, ch: make(chan domain.StockEvent, buffer), cancel: cancel, ended: make(chan struct{}), closed: make(chan struct{})}
	t.Cleanup(cancel)
	br.SubscribeStockEvents(ctx, after, domain.NewStockEventSink(convert, s.ch), func(err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.doneCalls++
		if s.doneCalls == 1 {
			s.err = err
			close(s.ended)
		}
	})
	if read {
		go func() {
			defer close(s.closed)
			for e := range s.ch {
				s.mu.Lock()
				s.got = append(s.got, e)
				s.mu.Unlock()
			}
			select {
			case <-s.ended:
			default:
				s.mu.Lock()
				s.closedEarly = true
				s.mu.Unlock()
			}
		}()
	}
	return s
}

// events returns a copy of what the subscriber has read so far.
func (s *subscriber) events() []domain.StockEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]domain.StockEvent(nil), s.got...)
}

// lastSeq is the seq of the newest event read (0 for none).
func (s *subscriber) lastSeq() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.got) == 0 {
		return 0
	}
	return s.got[len(s.got)-1].Seq
}

// waitSeq waits until the subscriber has read the event with seq (or a later one).
func (s *subscriber) waitSeq(t *testing.T, seq int64, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("subscriber %s to read seq %d", s.name, seq), func() bool { return s.lastSeq() >= seq })
}

// waitEnded waits for done and, for a reading subscriber, for the channel
// to be closed; it returns what done got.
func (s *subscriber) waitEnded(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-s.ended:
	case <-time.After(timeout):
		t.Fatalf("subscriber %s: done was not called within %v", s.name, timeout)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// waitClosed waits for a reading subscriber's channel to be closed.
func (s *subscriber) waitClosed(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-s.closed:
	case <-time.After(timeout):
		t.Fatalf("subscriber %s: channel not closed within %v", s.name, timeout)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closedEarly {
		t.Fatalf("subscriber %s: channel closed before done was called", s.name)
	}
	if s.doneCalls != 1 {
		t.Fatalf("subscriber %s: done called %d times", s.name, s.doneCalls)
	}
}

// seqs returns the seqs of events.
func seqs(evs []domain.StockEvent) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// requireDense fails unless got is exactly first, first+1, …, last.
func requireDense(t *testing.T, what string, got []int64, first, last int64) {
	t.Helper()
	if int64(len(got)) != last-first+1 {
		t.Fatalf("%s: %d events, want %d (seq %d..%d); first %v, last %v", what, len(got), last-first+1, first, last,
			got[:min(len(got), 5)], got[max(0, len(got)-5):])
	}
	for i, s := range got {
		if s != first+int64(i) {
			t.Fatalf("%s: position %d has seq %d, want %d (a gap, duplicate or reordering); around it: %v",
				what, i, s, first+int64(i), got[max(0, i-3):min(len(got), i+4)])
		}
	}
}

// requireSameEvents fails unless got and want are the same events.
func requireSameEvents(t *testing.T, what string, got, want []domain.StockEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.SKU != w.SKU || g.Location != w.Location || g.Cause != w.Cause || g.OnHand != w.OnHand ||
			g.Reserved != w.Reserved || !g.At.Equal(w.At) || g.CheckoutID != w.CheckoutID ||
			(g.ReservationID == nil) != (w.ReservationID == nil) || (g.ReservationID != nil && *g.ReservationID != *w.ReservationID) {
			t.Fatalf("%s: event %d is %+v, the database has %+v", what, i, g, w)
		}
	}
}
