package events_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/events"
	"inventory/testkit"
)

// Eight writers make thousands of balance changes while a subscriber that
// started from the beginning reads: it gets exactly seq 1..N, N being every
// event written, each as stored, and its last event of each balance is that
// balance as it is in the table.
func TestBrokerConcurrentWritersGapFree(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br, _ := b.startBroker(t, b.Store, events.Config{Tick: 10 * time.Millisecond})
	w := newWorkload(t, b, "GF", 3, 3)

	zero := int64(0)
	sub := subscribe(t, br, "all", &zero, passAll, 256, true)
	const writers, perWriter = 8, 300
	start := time.Now()
	w.run(t, writers, perWriter, 1)
	writing := time.Since(start)
	n := b.waitPublished(t)
	sub.waitSeq(t, n, 20*time.Second)
	delivered := time.Since(start)

	got := sub.events()
	requireDense(t, "the subscriber's seqs", seqs(got), 1, n)
	if n != w.calls.Load() {
		// Every successful call in this workload changes exactly one balance.
		t.Fatalf("%d events for %d balance-changing calls", n, w.calls.Load())
	}
	requireSameEvents(t, "the subscriber's events", got, b.Published(t, 0))
	requireLastIsBalance(t, b, "the subscriber", got)
	t.Logf("%d events from %d writers: written in %v, all delivered after %v (%.0f events/s end to end)",
		n, writers, writing.Round(time.Millisecond), delivered.Round(time.Millisecond), float64(n)/delivered.Seconds())

	// Nothing more arrives, and the subscription ends cleanly with its context.
	time.Sleep(100 * time.Millisecond)
	if extra := sub.events()[n:]; len(extra) != 0 {
		t.Fatalf("events after the last one: %+v", extra)
	}
	sub.cancel()
	if err := sub.waitEnded(t, 5*time.Second); err != nil {
		t.Fatalf("a cancelled subscription ended with %v, want nil", err)
	}
	sub.waitClosed(t, 5*time.Second)
}

// Two server instances (two brokers on their own pools, one database) both
// relay and listen: the advisory lock lets one relay at a time, and a
// subscriber on each instance gets every event, 1..N, once.
func TestBrokerTwoInstances(t *testing.T) {
	t.Parallel()
	b := setup(t)
	otherPool, err := pgxpool.NewWithConfig(b.Ctx, b.Pool.Config().Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(otherPool.Close) // after the brokers stopped: cleanups run last first
	other := &testBundle{Kit: testkit.Kit{Ctx: b.Ctx, Pool: otherPool, Store: testkit.NewStore(t, otherPool)}, logs: b.logs, logger: b.logger}
	br1, _ := b.startBroker(t, b.Store, events.Config{Tick: 10 * time.Millisecond})
	br2, _ := other.startBroker(t, other.Store, events.Config{Tick: 10 * time.Millisecond})
	w := newWorkload(t, b, "TI", 2, 2)

	zero := int64(0)
	s1 := subscribe(t, br1, "instance 1", &zero, passAll, 256, true)
	s2 := subscribe(t, br2, "instance 2", &zero, passAll, 256, true)
	start := time.Now()
	w.run(t, 4, 60, 2)
	n := b.waitPublished(t)
	s1.waitSeq(t, n, 10*time.Second)
	s2.waitSeq(t, n, 10*time.Second)
	requireDense(t, "the subscriber on instance 1", seqs(s1.events()), 1, n)
	requireDense(t, "the subscriber on instance 2", seqs(s2.events()), 1, n)
	requireSameEvents(t, "instance 1", s1.events(), b.Published(t, 0))
	requireSameEvents(t, "instance 2", s2.events(), b.Published(t, 0))
	t.Logf("%d events relayed by two instances in %v", n, time.Since(start).Round(time.Millisecond))
}
