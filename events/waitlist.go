package events

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"inventory/domain"
)

var _ domain.WaitlistSignals = (*Broker)(nil)

// waitlistWatchers fans waitlist notifications (domain.WaitlistChannel,
// payload a checkout id) out to this instance's waitlistChanged
// subscriptions of that checkout. The zero value is ready.
type waitlistWatchers struct {
	mu      sync.Mutex
	subs    map[string]map[chan struct{}]struct{} // checkout id -> its watchers
	since   map[string]time.Time                  // checkout id -> when its first watcher came
	stopped bool                                  // the broker stopped: every channel is closed
}

// WatchWaitlist implements domain.WaitlistSignals. The channel has room for
// one signal, so a burst of changes wakes a watcher once and the listener
// never waits for a watcher that is busy re-reading. It is closed when the
// broker stops (at once if it has), as stock event streams end then.
func (b *Broker) WatchWaitlist(ctx context.Context, checkoutID string) <-chan struct{} {
	w := &b.waitlist
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		close(ch)
		return ch
	}
	if w.subs == nil {
		w.subs = map[string]map[chan struct{}]struct{}{}
	}
	if w.subs[checkoutID] == nil {
		w.subs[checkoutID] = map[chan struct{}]struct{}{}
		if w.since == nil {
			w.since = map[string]time.Time{}
		}
		w.since[checkoutID] = time.Now()
	}
	w.subs[checkoutID][ch] = struct{}{}
	w.mu.Unlock()
	// A watcher is one live subscription (or one group of them, fanout),
	// as a stock event reader is: /metrics counts it.
	b.subscribers.Add(1)
	context.AfterFunc(ctx, func() {
		b.subscribers.Add(-1)
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.subs[checkoutID], ch)
		if len(w.subs[checkoutID]) == 0 {
			delete(w.subs, checkoutID)
			delete(w.since, checkoutID)
		}
	})
	return ch
}

// stop closes every watcher's channel; later watchers get a closed one.
func (w *waitlistWatchers) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	for _, set := range w.subs {
		for ch := range set {
			close(ch)
		}
	}
	w.subs = nil
}

// wake signals the watchers of one checkout, or (all) of every checkout.
// A notification costs its own checkout's watchers, not a walk over all.
func (w *waitlistWatchers) wake(checkoutID string, all bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	signal := func(set map[chan struct{}]struct{}) {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default: // a wake-up is already pending
			}
		}
	}
	if !all {
		signal(w.subs[checkoutID])
		return
	}
	for _, set := range w.subs {
		signal(set)
	}
}

// watched lists the checkouts with watchers on this instance, each with
// when its first watcher came (its subscriptions read what was so then).
func (w *waitlistWatchers) watched() map[string]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.since)
}

// HandleNotification wakes the notified checkout's watchers.
func (w *waitlistWatchers) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	w.wake(n.Payload, false)
	return nil
}

// HandleBacklog runs each time the LISTEN connection is (re)made, after
// LISTEN: notifications sent while it was down are lost, so every watcher
// re-reads.
func (w *waitlistWatchers) HandleBacklog(context.Context, string, *pgx.Conn) error {
	w.wake("", true)
	return nil
}
