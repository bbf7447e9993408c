package events_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/events"
	"inventory/testkit"
)

// Three instances under a steady write load: one relays and the others
// stand by, instead of all three running a relay transaction every tick;
// idle, the others look only now and then; when the one that relayed stops,
// another takes over and every event is still published, once, in order.
func TestRelayOneInstanceAtATime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const tick = 10 * time.Millisecond
	var brokers []*events.Broker
	var stops []func()
	for i := range 3 {
		kit := b.Kit
		if i > 0 {
			pool, err := pgxpool.NewWithConfig(b.Ctx, b.Pool.Config().Copy())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close) // after the brokers stopped: cleanups run last first
			kit = testkit.Kit{Ctx: b.Ctx, Pool: pool, Store: testkit.NewStore(t, pool)}
		}
		other := &testBundle{Kit: kit, logs: b.logs, logger: b.logger}
		br, stop := other.startBroker(t, other.Store, events.Config{Tick: tick})
		brokers, stops = append(brokers, br), append(stops, stop)
	}
	w := newWorkload(t, b, "RS", 4, 2)
	attempts := func() (all []int64, sum int64) {
		for _, br := range brokers {
			all = append(all, br.RelayAttempts())
			sum += br.RelayAttempts()
		}
		return all, sum
	}

	// A steady load: each writer's call commits in a few ms, so there is
	// almost always something to publish and the relaying instance keeps
	// notifying.
	before, sum0 := attempts()
	start := time.Now()
	w.run(t, 4, 150, 1)
	ticks := float64(time.Since(start) / tick)
	after, sum1 := attempts()
	// Every instance trying every tick runs about three relay transactions
	// per tick; one relaying while the others stand by runs about one, and
	// a few more when the load pauses long enough for another to step in.
	if total := float64(sum1 - sum0); ticks < 20 || total > 1.6*ticks {
		t.Fatalf("relay transactions per instance over %.0f ticks of load: %v → %v; want at most 1.6 per tick in all", ticks, before, after)
	}
	t.Logf("%d relay transactions over %.0f ticks of load by the three instances (%v → %v)", sum1-sum0, ticks, before, after)
	leader, most := 0, int64(0)
	for i := range brokers {
		if d := after[i] - before[i]; d > most {
			leader, most = i, d
		}
	}
	n := b.waitPublished(t)

	// Idle: the instance that published last keeps trying every tick, the
	// others only now and then (every instance every tick was 3 per tick).
	_, idle0 := attempts()
	idleStart := time.Now()
	time.Sleep(time.Second)
	idleTicks := float64(time.Since(idleStart) / tick)
	idleAll, idle1 := attempts()
	if total := float64(idle1 - idle0); total > 1.6*idleTicks {
		t.Fatalf("%.0f relay transactions over %.0f idle ticks (%v); want at most 1.6 per tick in all", total, idleTicks, idleAll)
	}
	t.Logf("idle: %d relay transactions over %.0f ticks", idle1-idle0, idleTicks)

	// The instance that relayed most stops: the others stop standing by
	// within a few ticks of its last notification, and publish the rest.
	publishedBy := func() (n int64) {
		for i, br := range brokers {
			if i != leader {
				n += br.Published()
			}
		}
		return n
	}
	othersBefore := publishedBy()
	stops[leader]()
	w.run(t, 4, 40, 2)
	m := b.waitPublished(t)
	// A relay counts what it published after its transaction commits, so
	// the database can show an event published a moment before the count
	// of the instance that published it does: wait for the counts (the
	// stopped instance publishes nothing, so only the others can reach it).
	deadline := time.Now().Add(5 * time.Second)
	for publishedBy()-othersBefore < m-n && time.Now().Before(deadline) {
		time.Sleep(tick)
	}
	if got := publishedBy() - othersBefore; got < m-n {
		t.Fatalf("after the relaying instance stopped the others published %d of the %d new events", got, m-n)
	}
	for i, br := range brokers {
		if i == leader {
			continue
		}
		zero := int64(0)
		s := subscribe(t, br, "instance", &zero, passAll, 256, true)
		s.waitSeq(t, m, 10*time.Second)
		requireDense(t, "a subscriber on a remaining instance", seqs(s.events()), 1, m)
	}
}
