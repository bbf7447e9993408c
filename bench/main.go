// Command bench measures the write paths that decide how the server behaves
// on its busiest day, side by side in one run on one database, and prints
// ratios. Run it with `make bench` (it finds or starts PostgreSQL itself).
//
//	go run ./bench [-duration 10s] [-workers 32]
//
// Scenarios:
//   - flash sale: every worker reserves 1 unit of the same SKU and releases
//     it, through the real store (conditional UPDATE, ledger, outbox event,
//     River expiry job), while the event relay runs — against the same work
//     spread over one SKU per worker. The ratio is what queuing on one
//     balance row costs.
//   - notify per write: the reserve transaction at SQL level (conditional
//     UPDATE + ledger row + outbox row) with and without a pg_notify in each
//     transaction — the design the event relay exists to avoid.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/domain"
	"inventory/events"
	"inventory/migrations"
	"inventory/store"
)

func main() {
	duration := flag.Duration("duration", 10*time.Second, "how long each scenario runs")
	workers := flag.Int("workers", 32, "concurrent clients")
	flag.Parse()
	if err := run(*duration, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(d time.Duration, workers int) error {
	ctx := domain.WithActor(context.Background(), domain.Actor{Role: domain.RoleAdmin, Name: "bench"})
	pool, cleanup, err := freshDatabase(ctx, workers)
	if err != nil {
		return err
	}
	defer cleanup()
	st := store.New(pool)
	for _, l := range []string{"AMS"} {
		if _, err := st.LocationCreate(ctx, domain.CreateLocationInput{Code: l, Name: l}); err != nil {
			return err
		}
	}
	for i := range workers {
		if err := stockSKU(ctx, st, fmt.Sprintf("SKU-%d", i), 1_000_000); err != nil {
			return err
		}
	}
	if err := stockSKU(ctx, st, "FLASH", 1_000_000); err != nil {
		return err
	}

	// The server's own event broker runs alongside, as in production: it
	// publishes the outbox every tick and fetches what it published.
	relayCtx, stopRelay := context.WithCancel(ctx)
	defer stopRelay()
	var relay sync.WaitGroup
	broker := events.NewBroker(st, pool, events.Config{}, slog.New(slog.DiscardHandler))
	relay.Go(func() { _ = broker.Run(relayCtx) })

	fmt.Printf("%d workers, %s per scenario, PostgreSQL on this machine\n\n", workers, d)
	hot, err := measure(ctx, d, workers, func(ctx context.Context, w, i int) error { return reserveRelease(ctx, st, "FLASH", w, i) })
	if err != nil {
		return err
	}
	spread, err := measure(ctx, d, workers, func(ctx context.Context, w, i int) error {
		return reserveRelease(ctx, st, fmt.Sprintf("SKU-%d", w), w, i)
	})
	if err != nil {
		return err
	}
	stopRelay()
	relay.Wait()
	rawHot, err := measure(ctx, d, workers, func(ctx context.Context, _, _ int) error { return rawReserve(ctx, pool, "FLASH", false) })
	if err != nil {
		return err
	}
	quiet, err := measure(ctx, d, workers, func(ctx context.Context, w, _ int) error {
		return rawReserve(ctx, pool, fmt.Sprintf("SKU-%d", w), false)
	})
	if err != nil {
		return err
	}
	loud, err := measure(ctx, d, workers, func(ctx context.Context, w, _ int) error {
		return rawReserve(ctx, pool, fmt.Sprintf("SKU-%d", w), true)
	})
	if err != nil {
		return err
	}
	perOp, err := statementsPerOp(ctx, pool)
	if err != nil {
		return err
	}
	fmt.Printf("%-62s %10s\n", "scenario", "ops/s")
	fmt.Printf("%-62s %10.0f\n", "reserve+release, every worker on one SKU (flash sale)", hot)
	fmt.Printf("%-62s %10.0f\n", "reserve+release, one SKU per worker", spread)
	fmt.Printf("%-62s %10.0f\n", "reserve tx (UPDATE+ledger+outbox), every worker on one SKU", rawHot)
	fmt.Printf("%-62s %10.0f\n", "reserve tx (UPDATE+ledger+outbox), relay notifies per batch", quiet)
	fmt.Printf("%-62s %10.0f\n", "reserve tx (UPDATE+ledger+outbox) + pg_notify per transaction", loud)
	fmt.Printf("\nflash sale / spread:        %.2f\n", hot/spread)
	fmt.Printf("reserve tx one SKU / spread: %.2f\n", rawHot/quiet)
	fmt.Printf("notify per write / batched: %.2f\n", loud/quiet)
	fmt.Printf("statements per reserve+release through the store: %.1f (the SQL reserve transaction: 3)\n", perOp)
	return nil
}

// measure runs op in workers goroutines for d and returns completed ops/s.
func measure(ctx context.Context, d time.Duration, workers int, op func(context.Context, int, int) error) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var done atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var once sync.Once
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				if err := op(ctx, w, i); err != nil {
					if ctx.Err() == nil {
						once.Do(func() { firstErr = err })
						cancel()
					}
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(done.Load()) / time.Since(start).Seconds(), firstErr
}

func reserveRelease(ctx context.Context, st *store.Store, sku string, w, i int) error {
	loc := "AMS"
	res, _, err := st.ReservationCreate(ctx, domain.ReserveInput{CheckoutID: fmt.Sprintf("bench-%d", w), RequestKey: fmt.Sprintf("%s-%d", sku, i),
		TTLSeconds: 900, Lines: []domain.ReserveLine{{SKU: sku, Location: &loc, Quantity: 1}}})
	if err != nil {
		return err
	}
	_, err = st.ReservationRelease(ctx, domain.Scope{}, domain.ReleaseInput{ID: res.ID, Reason: domain.ReasonOther})
	return err
}

// rawReserve is the seeds' reserve transaction at SQL level on sku,
// optionally with the per-transaction NOTIFY the relay avoids.
func rawReserve(ctx context.Context, pool *pgxpool.Pool, sku string, notify bool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			WITH b AS (
				UPDATE balances SET reserved = reserved + 1, updated_at = now()
				WHERE sku_id = (SELECT id FROM skus WHERE code = $1) AND on_hand - reserved >= 1
				RETURNING *
			), ledger AS (
				INSERT INTO stock_movements (sku_id, location_id, reserved_delta, cause, actor) SELECT sku_id, location_id, 1, 'reserved', 'bench' FROM b
			)
			INSERT INTO stock_events (sku_id, location_id, cause, on_hand, reserved) SELECT sku_id, location_id, 'reserved', on_hand, reserved FROM b`,
			sku)
		if err != nil || !notify {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify('inventory_bench', 'x')`)
		return err
	})
}

// statementCounter counts the statements sent through a pool.
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// statementsPerOp runs 100 reserve+release pairs one after another and
// returns the statements each pair sent, BEGIN and COMMIT included.
func statementsPerOp(ctx context.Context, pool *pgxpool.Pool) (float64, error) {
	counter := &statementCounter{}
	cfg := pool.Config().Copy()
	cfg.ConnConfig.Tracer = counter
	counted, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer counted.Close()
	cst := store.New(counted)
	if err := counted.Ping(ctx); err != nil {
		return 0, err
	}
	counter.n.Store(0)
	const n = 100
	for i := range n {
		if err := reserveRelease(ctx, cst, "SKU-0", -1, i); err != nil {
			return 0, err
		}
	}
	return float64(counter.n.Load()) / n, nil
}

func stockSKU(ctx context.Context, st *store.Store, code string, q int) error {
	if _, err := st.SKUCreate(ctx, domain.CreateSKUInput{Code: code, Name: code, Kind: domain.KindQuantity}); err != nil {
		return err
	}
	for q > 0 {
		n := min(q, domain.MaxQuantity)
		if _, err := st.StockReceive(ctx, domain.ReceiveStockInput{SKU: code, Location: "AMS", Quantity: n, Reference: "bench"}); err != nil {
			return err
		}
		q -= n
	}
	return nil
}

// freshDatabase creates and migrates inventory_bench on DATABASE_URL's server.
func freshDatabase(ctx context.Context, workers int) (*pgxpool.Pool, func(), error) {
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		return nil, nil, errors.New("DATABASE_URL is not set: run make bench")
	}
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		return nil, nil, err
	}
	defer admin.Close(ctx)
	for _, q := range []string{"DROP DATABASE IF EXISTS inventory_bench WITH (FORCE)", "CREATE DATABASE inventory_bench"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			return nil, nil, err
		}
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, nil, err
	}
	u.Path = "/inventory_bench"
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, nil, err
	}
	cfg.MaxConns = int32(workers + 4)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := migrations.Up(ctx, pool, slog.New(slog.DiscardHandler)); err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, pool.Close, nil
}
