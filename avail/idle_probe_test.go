package avail_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inventory/avail"
	"inventory/domain"
	"inventory/events"
	"inventory/store"
	"inventory/testkit"
)

// headCounter is the real store, counting the copy's own head probes.
type headCounter struct {
	*store.Store
	probes atomic.Int64
}

func (h *headCounter) AvailabilityHead(ctx context.Context) (int64, time.Duration, error) {
	h.probes.Add(1)
	return h.Store.AvailabilityHead(ctx)
}

// An idle instance keeps its copy's staleness known from its own relay's
// transactions, without a head query every probe interval (50 a second per
// instance before): the copy stays fresh (well within its bound, so it keeps
// answering) through a second of idle, and a change made meanwhile is
// applied and known fresh. The staleness figure itself is logged, not
// asserted: on a loaded machine it reached 129 ms where it is ~20 ms alone.
func TestIdleCopyKnowsItsStalenessWithoutProbing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Catalog(t, domain.KindQuantity, []string{"IP-A"}, "IP-L")
	st := &headCounter{Store: b.Store}
	br := events.NewBroker(st, b.Pool, events.Config{Tick: 10 * time.Millisecond}, b.logger)
	c := avail.New(st, br, avail.Config{MaxLag: time.Second, ProbeInterval: 20 * time.Millisecond}, b.logger)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = br.Run(ctx) })
	wg.Go(func() { c.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	waitFor(t, 10*time.Second, "the copy to load", func() bool { return c.Lag() < 200*time.Millisecond })

	p0 := st.probes.Load()
	var worst time.Duration
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		worst = max(worst, c.Lag())
	}
	probes := st.probes.Load() - p0
	if probes > 10 {
		t.Errorf("%d head queries in 1 s of idle, want almost none (the relay's transactions say the head)", probes)
	}
	if worst > c.MaxLag()/2 {
		t.Errorf("staleness at idle reached %v, want well within the bound (< %v)", worst, c.MaxLag()/2)
	}

	if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "IP-A", Location: "IP-L", Quantity: 3, Reference: testkit.Ref("PO")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the receipt to reach the copy", func() bool { return c.Seq() >= 1 && c.Lag() < 100*time.Millisecond })
	t.Logf("idle for 1 s: %d head queries, staleness at most %v", probes, worst)
}
