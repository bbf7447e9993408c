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
	br, stop := b.startBroker(t, b.Store, events.Config{Tick: 10 * time.Millisecond, Buffer: 2, StallTimeout: 200 * time.Millisecond, Recent: 5})
	b.Catalog(t, domain.KindQuantity, []string{"LK-A", "LK-B"}, "LK-L")
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
	var st *domain.ErrSubscriberStalled
	if err := stalled.waitEnded(t, 5*time.Second); !errors.As(err, &st) || st.Next != 3 {
		t.Fatalf("stalled: %v, want *domain.ErrSubscriberStalled at seq 3", err)
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

	// Stop the broker: the subscriptions still running end with an error
	// that says where to resume, not a quiet completion.
	stop()
	for s, next := range map[*subscriber]int64{live: n + 1, filtered: n + 1, unread: n + 1} { // unread holds 11..n in its buffer
		var st *domain.ErrStreamStopped
		if err := s.waitEnded(t, time.Second); !errors.As(err, &st) || st.Next != next {
			t.Fatalf("%s ended with %v when the broker stopped, want *domain.ErrStreamStopped at seq %d", s.name, err, next)
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

	// Subscribing to a stopped broker ends at once, saying so.
	// (It may deliver what it can read before it notices; Next says where
	// the delivered ones end.)
	late := subscribe(t, br, "after the broker stopped", &zero, passAll, 16, true)
	var stopped *domain.ErrStreamStopped
	err := late.waitEnded(t, time.Second)
	late.waitClosed(t, time.Second)
	if !errors.As(err, &stopped) || stopped.Next != int64(len(late.events()))+1 {
		t.Fatalf("subscribing to a stopped broker: %v after %d events, want *domain.ErrStreamStopped at the next seq", err, len(late.events()))
	}
	lateLive := subscribe(t, br, "live after the broker stopped", nil, passAll, 16, true)
	if err := lateLive.waitEnded(t, time.Second); !errors.As(err, &stopped) {
		t.Fatalf("subscribing to a stopped broker: %v, want *domain.ErrStreamStopped", err)
	}
	lateLive.waitClosed(t, time.Second)

	// The pool is the test's, not the broker's: close it, then nothing may
	// be left of what this test started.
	b.Pool.Close()
	goleak.VerifyNone(t, ignore)
}
