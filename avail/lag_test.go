package avail_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/avail"
	"inventory/domain"
	"inventory/events"
	"inventory/testkit"
)

// receipt is one committed receipt on the tick SKU: its call started
// before its transaction and returned after its commit.
type receipt struct {
	started, returned time.Time
	onHand            int
}

// Under 32 writers reserving and releasing (the broker at its default
// tick, the copy at its defaults), the copy never answers older than its
// bound against the database itself: one more writer receives one unit at
// a time on a SKU of its own, noting when each receipt's call returned, and
// every answer the copy gives includes every receipt that returned more
// than MaxLag before it was asked for (past its bound, the copy leaves the
// answer to the database). This holds however loaded the machine is; how
// stale the copy is under this load is a figure, logged (with the real age
// of its answers, from the receipts), not asserted.
func TestCopyLagUnderReserveLoad(t *testing.T) {
	t.Parallel()
	b := setup(t)
	skus := []string{"H0", "H1", "H2", "H3"}
	b.Catalog(t, domain.KindQuantity, append([]string{"TICK"}, skus...), "L")
	for _, s := range skus {
		if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: s, Location: "L", Quantity: 100000, Reference: "r-" + s}); err != nil {
			t.Fatal(err)
		}
	}
	// The broker and copy get a pool (and store) of their own, as in the
	// server: the writers' pool is saturated.
	pool, err := pgxpool.NewWithConfig(context.Background(), b.Pool.Config().Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := testkit.NewStore(t, pool)
	br := events.NewBroker(st, pool, events.Config{}, b.logger)
	c := avail.New(st, br, avail.Config{}, b.logger)
	maxLag := c.MaxLag()
	b.startCopy(t, br, c)
	tick := domain.AvailabilityQuery{SKUs: []string{"TICK"}}
	waitFor(t, 10*time.Second, "the copy to answer", func() bool { _, _, ok := c.Get(tick); return ok })

	const loadFor = 6 * time.Second
	stop := time.Now().Add(loadFor)
	var wg sync.WaitGroup
	var reserves atomic.Int64
	for g := range 32 {
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				res, _, err := b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: fmt.Sprintf("c%d", g), RequestKey: fmt.Sprintf("k%d", i),
					TTLSeconds: 600, Lines: []domain.ReserveLine{{SKU: skus[i%len(skus)], Quantity: 1}}})
				if err != nil {
					t.Error(err)
					return
				}
				reserves.Add(1)
				if i%2 == 1 {
					if _, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: res.ID, Reason: domain.ReasonCustomerCancelled}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	var receipts []receipt // ascending: one writer
	wg.Go(func() {
		for time.Now().Before(stop) {
			started := time.Now()
			bal, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "TICK", Location: "L", Quantity: 1, Reference: testkit.Ref("TICK")})
			if err != nil {
				t.Error(err)
				return
			}
			receipts = append(receipts, receipt{started: started, returned: time.Now(), onHand: bal.OnHand})
			time.Sleep(5 * time.Millisecond)
		}
	})
	type sample struct {
		asked  time.Time
		onHand int
	}
	var answers []sample
	var lags, relay []time.Duration // the copy's measured staleness; the relay's own (oldest unpublished event)
	fellBack := 0
	for time.Now().Before(stop) {
		lags = append(lags, c.Lag())
		if _, l, err := st.AvailabilityHead(b.Ctx); err == nil {
			relay = append(relay, l)
		}
		asked := time.Now()
		if got, _, ok := c.Get(tick); ok {
			answers = append(answers, sample{asked: asked, onHand: got[0].OnHand()})
		} else {
			fellBack++
		}
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()

	// Every answer includes every receipt that returned MaxLag before it
	// was asked for; its real age is at most the time since the first
	// receipt it lacks began.
	var ages []time.Duration
	older := 0
	for _, a := range answers {
		i, _ := slices.BinarySearchFunc(receipts, a.asked.Add(-maxLag), func(r receipt, at time.Time) int { return r.returned.Compare(at) })
		if i > 0 && a.onHand < receipts[i-1].onHand {
			if older++; older == 1 {
				r := receipts[i-1]
				t.Errorf("the copy answered on hand %d at %s; the receipt to %d returned %v before (bound %v)",
					a.onHand, a.asked.Format("15:04:05.000"), r.onHand, a.asked.Sub(r.returned).Round(time.Millisecond), maxLag)
			}
		}
		age := time.Duration(0)
		if j := slices.IndexFunc(receipts, func(r receipt) bool { return r.onHand > a.onHand }); j >= 0 && receipts[j].started.Before(a.asked) {
			age = a.asked.Sub(receipts[j].started)
		}
		ages = append(ages, age)
	}
	if older > 0 {
		t.Errorf("%d of the copy's %d answers were older than its bound", older, len(answers))
	}
	if len(answers) == 0 {
		t.Errorf("the copy answered none of %d queries under load: this test then proves nothing", fellBack)
	}
	b.requireAgrees(t, "after the load", c, nil)
	pct := func(d []time.Duration, p float64) time.Duration {
		if len(d) == 0 {
			return 0
		}
		slices.Sort(d)
		return d[min(int(float64(len(d))*p), len(d)-1)].Round(100 * time.Microsecond)
	}
	t.Logf("%d reserves and %d receipts in %v; %d answers from the copy, %d left to the database (bound %v); real age of the copy's answers (at most: since the first receipt each lacks began): p50 %v, p99 %v, max %v; measured staleness over %d samples: p50 %v, p99 %v, max %v; the relay's own lag (oldest unpublished event): p50 %v, p99 %v",
		reserves.Load(), len(receipts), loadFor, len(answers), fellBack, maxLag, pct(ages, .5), pct(ages, .99), pct(ages, 1),
		len(lags), pct(lags, .5), pct(lags, .99), pct(lags, 1), pct(relay, .5), pct(relay, .99))
}
