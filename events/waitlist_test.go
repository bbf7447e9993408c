package events_test

import (
	"context"
	"testing"
	"time"

	"inventory/domain"
	"inventory/events"
)

// signaled reports whether ch has a signal (or is closed) within d.
func signaled(ch <-chan struct{}, d time.Duration) (got, open bool) {
	select { // what is there already, first
	case _, ok := <-ch:
		return true, ok
	default:
	}
	select {
	case _, ok := <-ch:
		return true, ok
	case <-time.After(d):
		return false, true
	}
}

// TestWaitlistWatchers: a NOTIFY on the waitlist channel for a checkout
// wakes that checkout's watchers on the broker, once for a burst that came
// while they were busy, and no
// other checkout's; a watcher whose context ended is dropped; when the
// broker stops every watcher's channel closes, and one made later is closed
// at once.
func TestWaitlistWatchers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br, stop := b.startBroker(t, b.Store, events.Config{Tick: 10 * time.Millisecond})
	a1 := br.WatchWaitlist(b.Ctx, "cart-a")
	a2 := br.WatchWaitlist(b.Ctx, "cart-a")
	other := br.WatchWaitlist(b.Ctx, "cart-b")
	gone, cancel := context.WithCancel(b.Ctx)
	dropped := br.WatchWaitlist(gone, "cart-a")
	cancel()
	notify := func(payload string) {
		t.Helper()
		if _, err := b.Pool.Exec(b.Ctx, `SELECT pg_notify($1, $2)`, domain.WaitlistChannel, payload); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the broker listens (a probe checkout's notification gets
	// through), then take the wake-up every watcher got when the LISTEN
	// connection was made, if it came.
	probe := br.WatchWaitlist(b.Ctx, "probe")
	waitFor(t, 10*time.Second, "the broker to listen", func() bool {
		notify("probe")
		got, _ := signaled(probe, 50*time.Millisecond)
		return got
	})
	time.Sleep(100 * time.Millisecond)
	for _, ch := range []<-chan struct{}{a1, a2, other, dropped} {
		signaled(ch, 0)
	}
	for range 3 { // a burst, all delivered before the watchers look
		notify("cart-a")
	}
	time.Sleep(300 * time.Millisecond)
	for name, ch := range map[string]<-chan struct{}{"first": a1, "second": a2} {
		if got, _ := signaled(ch, 3*time.Second); !got {
			t.Fatalf("the %s watcher of cart-a was not woken", name)
		}
		if got, _ := signaled(ch, 200*time.Millisecond); got {
			t.Fatalf("the %s watcher of cart-a was woken twice for one burst", name)
		}
	}
	if got, _ := signaled(other, 200*time.Millisecond); got {
		t.Fatalf("cart-b's watcher was woken by cart-a's notification (listen generation %d)", br.ListenGeneration())
	}
	if got, _ := signaled(dropped, 200*time.Millisecond); got {
		t.Fatal("a watcher whose context ended was still woken")
	}

	stop()
	for name, ch := range map[string]<-chan struct{}{"cart-a": a1, "cart-b": other} {
		if got, open := signaled(ch, 3*time.Second); !got || open {
			t.Fatalf("%s's watcher was not closed when the broker stopped", name)
		}
	}
	if got, open := signaled(br.WatchWaitlist(b.Ctx, "cart-c"), 0); !got || open {
		t.Fatal("a watcher made after the broker stopped is not closed")
	}
}
