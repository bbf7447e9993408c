package events_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"inventory/domain"
	"inventory/events"
)

// After subscriptions end (by their context, by a stall, by a convert
// error, by the broker stopping, or because they started after it stopped)
// and Broker.Run has returned, no goroutine of the broker or of any
// subscription is left. Not parallel: a parallel test only starts once the
// sequential ones are done, so the goroutines counted here are this test's.
func TestBrokerNoGoroutineLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	b := setup(t)
	br, stop := b.startBroker(t, b.store, events.Config{Tick: 10 * time.Millisecond, Buffer: 2, StallTimeout: 200 * time.Millisecond, Recent: 5})
	b.catalog(t, domain.KindQuantity, []string{"LK-A", "LK-B"}, "LK-L")
	b.receiveMany(t, 10, "LK-L", "LK-A", "LK-B")
	published := b.waitPublished(t)

	zero := int64(0)
	boom := errors.New("convert failed")
	cancelled := subscribe(t, br, "cancelled", &zero, passAll, 16, true)
	stalled := subscribe(t, br, "stalled", &zero, passAll, 2, false)
	filtered := subscribe(t, br, "filtered", &zero, onlySKU("LK-B"), 16, true)
	live := subscribe(t, br, "live", nil, passAll, 64, true)
	unread := subscribe(t, br, "unread but not full", &published, passAll, 64, false)
	failing := subscribe(t, br, "convert error", &zero, func(_ context.Context, e domain.StockEvent) (domain.StockEvent, bool, error) {
		if e.Seq == 3 {
			return e, false, boom
		}
		return e, true, nil
	}, 16, true)
	deadCtx, cancelDead := context.WithCancel(context.Background())
	cancelDead()
	dead := subscribeCtx(t, deadCtx, br, "cancelled before subscribing", &zero, passAll, 16, true)

	cancelled.waitSeq(t, published, 10*time.Second)
	cancelled.cancel()
	b.receiveMany(t, 10, "LK-L", "LK-A", "LK-B")
	n := b.waitPublished(t)
	live.waitSeq(t, n, 10*time.Second)
	filtered.waitSeq(t, n, 10*time.Second)

	if err := cancelled.waitEnded(t, 5*time.Second); err != nil {
		t.Fatalf("cancelled: %v", err)
	}
	var st *events.Stalled
	if err := stalled.waitEnded(t, 5*time.Second); !errors.As(err, &st) || st.Next != 3 {
		t.Fatalf("stalled: %v, want *events.Stalled at seq 3", err)
	}
	if err := failing.waitEnded(t, 5*time.Second); !errors.Is(err, boom) {
		t.Fatalf("convert error: ended with %v, want %v", err, boom)
	}
	if got := seqs(failing.events()); len(got) != 2 || got[1] != 2 {
		t.Fatalf("convert error: delivered %v before failing at seq 3", got)
	}
	if err := dead.waitEnded(t, 5*time.Second); err != nil {
		t.Fatalf("cancelled before subscribing: %v", err)
	}

	// Stop the broker: the subscriptions still running end with nil.
	stop()
	for _, s := range []*subscriber{live, filtered, unread} {
		if err := s.waitEnded(t, time.Second); err != nil {
			t.Fatalf("%s ended with %v when the broker stopped", s.name, err)
		}
	}
	for _, s := range []*subscriber{cancelled, filtered, live, failing, dead} {
		s.waitClosed(t, time.Second)
	}
	for _, s := range []*subscriber{stalled, unread} {
		for range s.ch { // closed: the range ends
		}
	}
	if got := len(unread.events()); got != 0 {
		t.Fatalf("unread subscriber recorded %d events", got)
	}

	// Subscribing to a stopped broker ends at once.
	late := subscribe(t, br, "after the broker stopped", &zero, passAll, 16, true)
	if err := late.waitEnded(t, time.Second); err != nil {
		t.Fatalf("subscribing to a stopped broker: %v", err)
	}
	late.waitClosed(t, time.Second)
	lateLive := subscribe(t, br, "live after the broker stopped", nil, passAll, 16, true)
	if err := lateLive.waitEnded(t, time.Second); err != nil {
		t.Fatalf("subscribing to a stopped broker: %v", err)
	}
	lateLive.waitClosed(t, time.Second)

	// The pool is the test's, not the broker's: close it, then nothing may
	// be left of what this test started.
	b.pool.Close()
	goleak.VerifyNone(t, ignore)
}
