package avail_test

import (
	"context"
	"fmt"
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

// catalogCounter is the real store, counting the copy's catalog reads and
// the SKU codes they brought back.
type catalogCounter struct {
	*store.Store
	reads, codes atomic.Int64
}

func (c *catalogCounter) AvailabilityCatalogSince(ctx context.Context, known int, after int64) (domain.CatalogChange, error) {
	ch, err := c.Store.AvailabilityCatalogSince(ctx, known, after)
	c.reads.Add(1)
	c.codes.Add(int64(len(ch.New)))
	return ch, err
}

// Many requests naming SKUs that do not exist (random codes, as a scraper
// or an attacker would send) are answered from the copy (null, as the
// contract says) without reading the catalog's codes again, and without a
// database read each: the copy checks that the catalog has not grown at
// most once per CatalogInterval, in the background, whatever the requests.
func TestUnknownSKUsCostNoCatalogReads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Catalog(t, domain.KindQuantity, []string{"KNOWN"}, "L")
	if _, err := b.Pool.Exec(b.Ctx, `INSERT INTO skus (code, name, kind) SELECT 'FILL-' || i, 'filler', 'quantity' FROM generate_series(1, 2000) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "KNOWN", Location: "L", Quantity: 7, Reference: testkit.Ref("PO")}); err != nil {
		t.Fatal(err)
	}
	st := &catalogCounter{Store: b.Store}
	br := events.NewBroker(b.Store, b.Pool, events.Config{Tick: 10 * time.Millisecond}, b.logger)
	const interval = 250 * time.Millisecond
	c := avail.New(st, br, avail.Config{MaxLag: time.Second, CatalogInterval: interval}, b.logger)
	b.startCopy(t, br, c)
	waitFor(t, 10*time.Second, "the copy to answer", func() bool {
		got, _, ok := c.Get(domain.AvailabilityQuery{SKUs: []string{"KNOWN"}})
		return ok && got[0].OnHand() == 7
	})

	const clients, each = 8, 250
	// Each query naming an unknown SKU is followed by one naming only
	// KNOWN: what the copy leaves to the database for being stale (a busy
	// machine delays its probes) is left for both; the unknown code itself
	// must cost nothing more.
	var answered, fellBack, knownFellBack atomic.Int64
	started := time.Now()
	var wg sync.WaitGroup
	for g := range clients {
		wg.Go(func() {
			for i := range each {
				q := domain.AvailabilityQuery{SKUs: []string{fmt.Sprintf("NOPE-%d-%d", g, i), "KNOWN"}}
				got, _, ok := c.Get(q)
				if !ok {
					fellBack.Add(1)
				} else {
					answered.Add(1)
					if got[0] != nil || got[1] == nil || got[1].OnHand() != 7 {
						t.Errorf("%v answered %v, %v; want null and KNOWN's 7", q.SKUs, got[0], got[1])
						return
					}
				}
				if _, _, ok := c.Get(domain.AvailabilityQuery{SKUs: []string{"KNOWN"}}); !ok {
					knownFellBack.Add(1)
				}
				time.Sleep(4 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	took := time.Since(started)
	reads, codes := st.reads.Load(), st.codes.Load()
	t.Logf("%d requests for unknown SKUs in %v: %d answered from the copy, %d from the database (%d for KNOWN alone); %d catalog reads brought back %d SKU codes",
		clients*each, took.Round(time.Millisecond), answered.Load(), fellBack.Load(), knownFellBack.Load(), reads, codes)
	if codes > 0 {
		t.Errorf("the copy read %d SKU codes from the catalog (%d reads) though no SKU was created", codes, reads)
	}
	if max := int64(took/interval) + 2; reads > max {
		t.Errorf("%d catalog reads in %v, want at most %d (one per %v)", reads, took, max, interval)
	}
	if fellBack.Load() > knownFellBack.Load()+clients*each/20 {
		t.Errorf("%d of %d requests for unknown SKUs were left to the database, and %d of as many for KNOWN alone", fellBack.Load(), clients*each, knownFellBack.Load())
	}
}

// A SKU the copy does not know is answered null only while it did not
// exist as of a catalog check within the bound: once a SKU's creation is
// older than MaxLag, the copy answers it (or leaves it to the database),
// also when it committed after a SKU with a higher id (ids are taken at
// insert, not at commit), which a read of the ids after the newest known
// one alone would miss.
func TestCopyAnswersANewSKUNullOnlyWithinItsBound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Catalog(t, domain.KindQuantity, []string{"OLD"}, "L")
	const maxLag = 500 * time.Millisecond
	br := events.NewBroker(b.Store, b.Pool, events.Config{Tick: 10 * time.Millisecond}, b.logger)
	c := avail.New(b.Store, br, avail.Config{MaxLag: maxLag, CatalogInterval: 20 * time.Millisecond}, b.logger)
	b.startCopy(t, br, c)
	waitFor(t, 10*time.Second, "the copy to answer", func() bool {
		got, _, ok := c.Get(domain.AvailabilityQuery{SKUs: []string{"OLD"}})
		return ok && got[0] != nil
	})

	// watch asks for sku until the copy answers it (not null), and fails
	// at a null answer asked more than maxLag after created.
	watch := func(sku string, created time.Time) int {
		nulls := 0
		q := domain.AvailabilityQuery{SKUs: []string{sku, "OLD"}}
		waitFor(t, 10*time.Second, "the copy to answer "+sku, func() bool {
			asked := time.Now()
			got, _, ok := c.Get(q)
			if ok && got[0] == nil {
				if asked.Sub(created) > maxLag {
					t.Fatalf("%v after %s was created (bound %v) the copy answered it null", asked.Sub(created).Round(time.Millisecond), sku, maxLag)
				}
				nulls++
			}
			return ok && got[0] != nil && got[0].SKU == sku
		})
		return nulls
	}
	// Queries for unknown codes keep the catalog checked.
	for range 20 {
		c.Get(domain.AvailabilityQuery{SKUs: []string{"NOSUCH"}})
		time.Sleep(5 * time.Millisecond)
	}
	b.Catalog(t, domain.KindQuantity, []string{"NEW"})
	nulls := watch("NEW", time.Now())

	// LATE takes its id first and commits last.
	tx, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(b.Ctx) }()
	if _, err := tx.Exec(b.Ctx, `INSERT INTO skus (code, name, kind) VALUES ('LATE', 'late', 'quantity')`); err != nil {
		t.Fatal(err)
	}
	b.Catalog(t, domain.KindQuantity, []string{"EARLY"})
	nulls += watch("EARLY", time.Now())
	if err := tx.Commit(b.Ctx); err != nil {
		t.Fatal(err)
	}
	nulls += watch("LATE", time.Now())
	t.Logf("new SKUs answered null %d times, each within %v of its creation", nulls, maxLag)
}

// An answer that read a SKU as unknown (null), kept by a cache of
// serialized answers, stops being reusable once the SKU has existed for
// MaxLag: Unchanged says so, and the copy then answers the SKU.
func TestCachedNullEndsWithinTheBound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Catalog(t, domain.KindQuantity, []string{"OLD"}, "L")
	const maxLag = 500 * time.Millisecond
	br := events.NewBroker(b.Store, b.Pool, events.Config{Tick: 10 * time.Millisecond}, b.logger)
	c := avail.New(b.Store, br, avail.Config{MaxLag: maxLag, CatalogInterval: 20 * time.Millisecond}, b.logger)
	b.startCopy(t, br, c)
	q := domain.AvailabilityQuery{SKUs: []string{"OLD", "SOON"}}
	var deps []domain.AnswerDep
	waitFor(t, 10*time.Second, "the copy to answer SOON null", func() bool {
		got, _, d, ok := c.GetWithDeps(q)
		deps = d
		return ok && got[0] != nil && got[1] == nil
	})
	b.Catalog(t, domain.KindQuantity, []string{"SOON"})
	created := time.Now()
	waitFor(t, 10*time.Second, "the cached null to go stale", func() bool {
		asked := time.Now()
		if c.Unchanged(deps) {
			if asked.Sub(created) > maxLag {
				t.Fatalf("%v after SOON was created (bound %v) an answer that read it as unknown is still reusable", asked.Sub(created).Round(time.Millisecond), maxLag)
			}
			return false
		}
		return true
	})
	waitFor(t, 10*time.Second, "the copy to answer SOON", func() bool {
		got, _, ok := c.Get(q)
		return ok && got[1] != nil && got[1].SKU == "SOON"
	})
}
