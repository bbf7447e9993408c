package avail_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/avail"
	"inventory/codefile"
	"inventory/domain"
	"inventory/events"
	"inventory/store"
	"inventory/testkit"
)

type bundle struct {
	testkit.Kit
	logs   *testkit.LogBuffer
	logger *slog.Logger
}

func setup(t *testing.T) *bundle {
	t.Helper()
	kit := testkit.New(t, "test")
	logs, logger := testkit.TestLogger(t)
	return &bundle{Kit: kit, logs: logs, logger: logger}
}

// instance is one server instance's broker and copy, running until the
// test ends.
type instance struct {
	broker *events.Broker
	copy   *avail.Copy
}

func (b *bundle) instance(t *testing.T, cfg avail.Config) instance {
	t.Helper()
	// A pool of its own, named, as the server's events pool: a test can
	// drop exactly this instance's connections.
	pc := b.Pool.Config().Copy()
	pc.ConnConfig.RuntimeParams["application_name"] = "avail-test-instance"
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := testkit.NewStore(t, pool)
	br := events.NewBroker(st, pool, events.Config{Tick: 10 * time.Millisecond, Poll: 200 * time.Millisecond}, b.logger)
	c := avail.New(st, br, cfg, b.logger)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = br.Run(ctx) })
	wg.Go(func() { c.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return instance{broker: br, copy: c}
}

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

// terminate ends the test database's connections that match where (other
// than this one) and returns how many.
func (b *bundle) terminate(t *testing.T, where string) int {
	t.Helper()
	var killed int
	if err := b.Pool.QueryRow(b.Ctx, `
		SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND `+where+`) k`).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	return killed
}

// allSKUs is every SKU code in the database.
func (b *bundle) allSKUs(t *testing.T) []string {
	t.Helper()
	rows, err := b.Pool.Query(b.Ctx, `SELECT code FROM skus ORDER BY code`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// requireAgrees waits until c has applied every published event (the relay
// has published them all) and then requires its answer for every SKU, with
// and without a location filter, to equal the database's.
func (b *bundle) requireAgrees(t *testing.T, name string, c *avail.Copy, locFilter []string) {
	t.Helper()
	skus := b.allSKUs(t)
	for _, q := range []domain.AvailabilityQuery{{SKUs: skus}, {SKUs: skus, Locations: locFilter}} {
		var got, want []*domain.Availability
		var diff string
		deadline := time.Now().Add(20 * time.Second)
		for {
			var unpublished int
			if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM stock_events WHERE seq IS NULL`).Scan(&unpublished); err != nil {
				t.Fatal(err)
			}
			head, err := b.Store.StockEventsLatest(b.Ctx)
			if err != nil {
				t.Fatal(err)
			}
			var ok bool
			got, _, ok = c.Get(q)
			if want, err = b.Store.AvailabilityList(b.Ctx, q); err != nil {
				t.Fatal(err)
			}
			diff = compare(got, want)
			if ok && unpublished == 0 && c.Seq() == head && diff == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the copy (ok=%v, seq %d, head %d, %d unpublished) does not agree with the database for %d SKUs (locations %v): %s",
					name, ok, c.Seq(), head, unpublished, len(skus), q.Locations, diff)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func compare(got, want []*domain.Availability) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d entries, the database %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if (g == nil) != (w == nil) {
			return fmt.Sprintf("entry %d: copy %v, database %v", i, g, w)
		}
		if g == nil {
			continue
		}
		if g.SKU != w.SKU || len(g.Locations) != len(w.Locations) {
			return fmt.Sprintf("entry %d: copy %+v, database %+v", i, *g, *w)
		}
		for j := range w.Locations {
			gb, wb := g.Locations[j], w.Locations[j]
			if !gb.UpdatedAt.Equal(wb.UpdatedAt) {
				return fmt.Sprintf("%s@%s updatedAt: copy %v, database %v", wb.SKU, wb.Location, gb.UpdatedAt, wb.UpdatedAt)
			}
			gb.UpdatedAt, wb.UpdatedAt = time.Time{}, time.Time{}
			if !reflect.DeepEqual(gb, wb) {
				return fmt.Sprintf("copy %+v, database %+v", gb, wb)
			}
		}
	}
	return ""
}

// workload is random writes of every kind that moves a balance.
type workload struct {
	b         *bundle
	skus      []string // QUANTITY
	codeSKUs  []string // CODES
	locations []string
}

func newWorkload(t *testing.T, b *bundle) *workload {
	w := &workload{b: b}
	for i := range 6 {
		w.skus = append(w.skus, fmt.Sprintf("Q%d", i))
	}
	for i := range 2 {
		w.codeSKUs = append(w.codeSKUs, fmt.Sprintf("C%d", i))
	}
	w.locations = []string{"L0", "L1", "L2"}
	b.Catalog(t, domain.KindQuantity, w.skus, w.locations...)
	b.Catalog(t, domain.KindCodes, w.codeSKUs)
	for _, s := range w.skus {
		for _, l := range w.locations[:2] {
			if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: s, Location: l, Quantity: 20, Reference: testkit.Ref("PO")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return w
}

func (w *workload) run(t *testing.T, writers, perWriter int, seed uint64) {
	t.Helper()
	testkit.Writers(t, writers, func(g int) error { return w.writer(g, perWriter, seed) })
}

func (w *workload) writer(g, n int, seed uint64) error {
	b := w.b
	rng := rand.New(rand.NewPCG(seed, uint64(g)))
	var held []string
	for i := range n {
		sku := w.skus[rng.IntN(len(w.skus))]
		loc := w.locations[rng.IntN(len(w.locations))]
		var err error
		switch op := rng.IntN(16); {
		case op < 2:
			_, err = b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: sku, Location: loc, Quantity: 1 + rng.IntN(3), Reference: testkit.Ref("PO")})
		case op < 4:
			delta := 1 + rng.IntN(2)
			if op == 3 {
				delta = -delta
			}
			_, err = b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: sku, Location: loc, Delta: delta, Reason: "count", Reference: testkit.Ref("C")})
		case op == 4:
			_, err = b.Store.PreorderSet(b.Ctx, domain.SetPreorderInput{SKU: sku, Location: loc, PendingSupply: 5 + rng.IntN(10)})
		case op == 5:
			cs := w.codeSKUs[rng.IntN(len(w.codeSKUs))]
			codes := make([]string, 1+rng.IntN(3))
			for k := range codes {
				codes[k] = fmt.Sprintf("CODE-%d-%d-%d-%d", seed, g, i, k)
			}
			_, err = b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: cs, Location: loc, BatchRef: testkit.Ref("B")}, codefile.List(codes))
		case op < 10 || len(held) == 0:
			line := domain.ReserveLine{SKU: sku, Quantity: 1 + rng.IntN(2)}
			if rng.IntN(2) == 0 {
				line.Location = &loc
			}
			if rng.IntN(5) == 0 {
				line.SKU = w.codeSKUs[rng.IntN(len(w.codeSKUs))]
			}
			var res domain.Reservation
			res, _, err = b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{
				CheckoutID: fmt.Sprintf("cart-%d-%d", seed, g), RequestKey: fmt.Sprintf("k%d", i), TTLSeconds: 600,
				Lines: []domain.ReserveLine{line}})
			if err == nil && res.Status == domain.StatusHeld {
				held = append(held, res.ID)
			}
		default:
			k := rng.IntN(len(held))
			id := held[k]
			held = append(held[:k], held[k+1:]...)
			switch rng.IntN(3) {
			case 0:
				_, err = b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: id, Reason: domain.ReasonCustomerCancelled})
			case 1:
				_, err = b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: id, OrderRef: "o-" + id})
			default:
				if _, err = b.Pool.Exec(b.Ctx, `UPDATE reservations SET expires_at = now() - interval '1 second' WHERE id = $1`, id); err == nil {
					_, _, err = b.Store.ReservationExpire(b.Ctx, id)
				}
			}
		}
		if e, ok := domain.AsError(err); ok && (e.Code == domain.CodeOutOfStock || e.Code == domain.CodeBelowReserved ||
			e.Code == domain.CodeInvalidTransition || e.Code == domain.CodeNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("writer %d, call %d: %w", g, i, err)
		}
	}
	return nil
}

// The copy agrees with the database after a random workload of every kind
// of write, on two instances; midway the database drops the instances'
// LISTEN connections, later every connection of theirs (the relay's among
// them), each while writers run, and both copies reload and converge.
func TestCopyAgreesWithDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := newWorkload(t, b)
	a := b.instance(t, avail.Config{MaxLag: time.Second})
	c := b.instance(t, avail.Config{MaxLag: time.Second})
	w.run(t, 6, 60, 1)
	b.requireAgrees(t, "instance A", a.copy, []string{"L1", "L2"})
	b.requireAgrees(t, "instance B", c.copy, []string{"L0"})

	// Drop the instances' LISTEN connections while writers run.
	loadsA, loadsB := a.copy.Reloads(), c.copy.Reloads()
	var wg sync.WaitGroup
	wg.Go(func() { w.run(t, 4, 60, 2) })
	time.Sleep(100 * time.Millisecond)
	if killed := b.terminate(t, `query ILIKE 'listen%'`); killed < 2 {
		t.Fatalf("terminated %d LISTEN connections, want both instances'", killed)
	}
	wg.Wait()
	waitFor(t, 10*time.Second, "both copies to reload after their LISTEN connection dropped", func() bool {
		return a.copy.Reloads() > loadsA && c.copy.Reloads() > loadsB
	})
	b.requireAgrees(t, "instance A after the dropped LISTEN connections", a.copy, []string{"L2"})

	// Then every connection of both instances (the relay's, the fetches',
	// the probes', LISTEN): the relay restarts on new connections.
	loadsA, loadsB = a.copy.Reloads(), c.copy.Reloads()
	wg.Go(func() { w.run(t, 4, 60, 4) })
	time.Sleep(100 * time.Millisecond)
	if killed := b.terminate(t, `application_name = 'avail-test-instance'`); killed < 2 {
		t.Fatalf("terminated %d connections of the instances", killed)
	}
	wg.Wait()
	waitFor(t, 10*time.Second, "both copies to reload after losing every connection", func() bool {
		return a.copy.Reloads() > loadsA && c.copy.Reloads() > loadsB
	})
	w.run(t, 3, 30, 3)
	b.requireAgrees(t, "instance A after the dropped connections", a.copy, []string{"L2"})
	b.requireAgrees(t, "instance B after the dropped connections", c.copy, nil)
	if log := b.logs.String(); strings.Contains(log, "gap in the event stream") {
		t.Errorf("a copy saw a gap in the stream:\n%s", log)
	}
}

// A copy whose relay is stalled falls behind past MaxLag and then answers
// nothing: availability is read from the database, with the change the
// copy has not seen; once the relay publishes again the copy answers again.
//
// The guarantee is about commits, not about when the copy first falls
// back: once a change committed more than MaxLag ago is not in the copy,
// the copy answers nothing. Falling back earlier does not forbid a later
// answer (a head read before the change committed may still arrive and
// vouch for the copy), so the test waits out MaxLag from the commit and
// only then holds the copy to silence.
func TestStaleCopyFallsBackToDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Catalog(t, domain.KindQuantity, []string{"S"}, "L")
	if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "S", Location: "L", Quantity: 10, Reference: "r1"}); err != nil {
		t.Fatal(err)
	}
	const maxLag = 300 * time.Millisecond
	in := b.instance(t, avail.Config{MaxLag: maxLag})
	stock := avail.Stock{Stock: b.Store, Copy: in.copy}
	q := domain.AvailabilityQuery{SKUs: []string{"S"}}
	// r1's event applied, not only a load taken before the relay published
	// it: a copy that has yet to apply it falls behind on r1, not on r2.
	waitFor(t, 10*time.Second, "the copy to answer with r1 applied", func() bool {
		got, seq, ok := in.copy.Get(q)
		return ok && seq == 1 && got[0].OnHand() == 10
	})

	// Stall the relay: hold its advisory lock.
	tx, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(b.Ctx) }()
	if _, err := tx.Exec(b.Ctx, `SELECT pg_advisory_xact_lock($1)`, store.RelayLockKey); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "S", Location: "L", Quantity: 5, Reference: "r2"}); err != nil {
		t.Fatal(err)
	}
	committed := time.Now() // r2 committed before this
	waitFor(t, 5*time.Second, "the copy to fall back, MaxLag after r2 committed", func() bool {
		_, _, ok := in.copy.Get(q)
		return !ok && time.Since(committed) > maxLag
	})
	if lag := in.copy.Lag(); lag <= maxLag {
		t.Fatalf("the copy falls back with lag %v, within its bound", lag)
	}
	got, err := stock.AvailabilityList(b.Ctx, q)
	if err != nil || got[0].OnHand() != 15 {
		t.Fatalf("while the relay is stalled, availability = %+v, %v; want the database's on hand 15", got, err)
	}
	for end := time.Now().Add(maxLag); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if got, seq, ok := in.copy.Get(q); ok {
			t.Fatalf("the copy answered on hand %d at seq %d, %v after r2 committed, with lag %v",
				got[0].OnHand(), seq, time.Since(committed), in.copy.Lag())
		}
	}
	_ = tx.Rollback(b.Ctx)
	waitFor(t, 5*time.Second, "the copy to answer again", func() bool {
		got, seq, ok := in.copy.Get(q)
		return ok && got[0].OnHand() == 15 && seq == 2
	})
}

// Unknown SKUs and locations are learned from the catalog without a stock
// event; until then the copy leaves the query to the database.
func TestCopyLearnsNewCatalog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Catalog(t, domain.KindQuantity, []string{"A"}, "L")
	in := b.instance(t, avail.Config{MaxLag: time.Second, CatalogInterval: 10 * time.Millisecond})
	waitFor(t, 10*time.Second, "the copy to answer", func() bool {
		_, _, ok := in.copy.Get(domain.AvailabilityQuery{SKUs: []string{"A"}})
		return ok
	})
	b.Catalog(t, domain.KindQuantity, []string{"NEW"}, "M")
	q := domain.AvailabilityQuery{SKUs: []string{"NEW", "A", "NEW"}, Locations: []string{"M"}}
	waitFor(t, 5*time.Second, "the copy to learn the new SKU and location", func() bool {
		got, _, ok := in.copy.Get(q)
		return ok && len(got) == 3 && got[0] != nil && got[0].SKU == "NEW" && len(got[0].Locations) == 0 && got[2] != got[0]
	})
	if got, _, ok := in.copy.Get(domain.AvailabilityQuery{SKUs: []string{"NOSUCH"}}); ok && got[0] != nil {
		t.Fatalf("the copy answered %+v for a SKU that does not exist; the database answers null", *got[0])
	}
	if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "NEW", Location: "M", Quantity: 3, Reference: "r"}); err != nil {
		t.Fatal(err)
	}
	b.requireAgrees(t, "after the first receipt at a new location", in.copy, []string{"M"})
}

// A SKU the copy learns from the catalog (a query named it) while the
// event of its first receipt is not yet published is not answered as
// having no stock: the database answers until the copy has caught up past
// that catalog read. (Before the copy's catalog check finds it, the copy
// may answer it null: it did not exist as of a check within MaxLag.)
func TestCopyNeverAnswersACatalogSKUBeforeItsEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Catalog(t, domain.KindQuantity, []string{"A"}, "L")
	in := b.instance(t, avail.Config{MaxLag: time.Minute, CatalogInterval: 10 * time.Millisecond})
	waitFor(t, 10*time.Second, "the copy to answer", func() bool {
		_, _, ok := in.copy.Get(domain.AvailabilityQuery{SKUs: []string{"A"}})
		return ok
	})
	tx, err := b.Pool.Begin(b.Ctx) // stall the relay
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(b.Ctx) }()
	if _, err := tx.Exec(b.Ctx, `SELECT pg_advisory_xact_lock($1)`, store.RelayLockKey); err != nil {
		t.Fatal(err)
	}
	b.Catalog(t, domain.KindQuantity, []string{"X"})
	if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "X", Location: "L", Quantity: 5, Reference: "r"}); err != nil {
		t.Fatal(err)
	}
	q := domain.AvailabilityQuery{SKUs: []string{"X"}}
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if got, _, ok := in.copy.Get(q); ok && got[0] != nil && (len(got[0].Locations) != 1 || got[0].OnHand() != 5) {
			t.Fatalf("the copy answered X as %+v before its receipt's event reached it; the database has 5 on hand", *got[0])
		}
	}
	_ = tx.Rollback(b.Ctx)
	waitFor(t, 5*time.Second, "the copy to answer X", func() bool {
		got, _, ok := in.copy.Get(q)
		return ok && got[0] != nil && got[0].OnHand() == 5
	})
}
