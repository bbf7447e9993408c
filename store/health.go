package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

var _ domain.Reservations = (*Store)(nil)

// ageBuckets are the held-by-age buckets, by minimum age in seconds.
var ageBuckets = []domain.AgeBucket{
	{Label: "<1m", MinAgeSeconds: 0},
	{Label: "1m-5m", MinAgeSeconds: 60},
	{Label: "5m-15m", MinAgeSeconds: 300},
	{Label: "15m-1h", MinAgeSeconds: 900},
	{Label: ">=1h", MinAgeSeconds: 3600},
}

// InventoryHealthGet reads the health report in one snapshot: holds and how
// old they are, holds past their deadline (expiry not keeping up), the share
// of reserve attempts refused in the last hour, and the last sweeper pass.
func (s *Store) InventoryHealthGet(ctx context.Context) (domain.InventoryHealth, error) {
	var h domain.InventoryHealth
	err := pgx.BeginTxFunc(ctx, s.pool, readTx, func(tx pgx.Tx) error {
		mins := make([]int32, len(ageBuckets))
		for i, b := range ageBuckets {
			mins[i] = int32(b.MinAgeSeconds)
		}
		var counts []int32
		var failures, successes int
		err := tx.QueryRow(ctx, `
			WITH held AS (SELECT created_at, expires_at FROM reservations WHERE status = 'held')
			SELECT (SELECT count(*) FROM held),
			       (SELECT count(*) FROM held WHERE expires_at < now()),
			       (SELECT array_agg((SELECT count(*) FROM held WHERE width_bucket(extract(epoch FROM now() - created_at), $1::int[]) = i)::int ORDER BY i)
			        FROM generate_series(1, cardinality($1::int[])) i),
			       (SELECT count(*) FROM allocation_failures WHERE at > now() - interval '1 hour'),
			       (SELECT count(*) FROM reservations WHERE created_at > now() - interval '1 hour')`, mins).
			Scan(&h.HeldReservations, &h.OverdueHolds, &counts, &failures, &successes)
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, unshippedSummary).Scan(&h.UnshippedOrders, &h.UnshippedUnits, &h.OldestUnshippedSeconds); err != nil {
			return err
		}
		h.HeldByAge = make([]domain.AgeBucket, len(ageBuckets))
		for i, b := range ageBuckets {
			b.Count = int(counts[i])
			h.HeldByAge[i] = b
		}
		if failures+successes > 0 {
			h.AllocationFailureRate = float64(failures) / float64(failures+successes)
		}
		var released int
		var at time.Time
		err = tx.QueryRow(ctx, `SELECT released, at FROM sweeper_runs ORDER BY id DESC LIMIT 1`).Scan(&released, &at)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		h.LastSweepReleased, h.LastSweepAt = &released, &at
		return err
	})
	return h, wrap("InventoryHealthGet", err)
}

// OperationsSnapshot is what an on-call engineer's alerts read at every
// scrape, in one cheap statement: holds, holds past their deadline (expiry
// not keeping up), how long the oldest committed event has waited for the
// relay (0 when none waits), and the orders waiting to ship from on-shipment
// locations (the warehouse keeping up).
func (s *Store) OperationsSnapshot(ctx context.Context) (domain.OperationsSnapshot, error) {
	var o domain.OperationsSnapshot
	err := s.pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM reservations WHERE status = 'held'),
		       (SELECT count(*) FROM reservations WHERE status = 'held' AND expires_at < now()),
		       coalesce((SELECT extract(epoch FROM now() - e.at) FROM stock_events e WHERE e.seq IS NULL ORDER BY e.id LIMIT 1), 0)::float8,
		       u.orders, u.units, u.oldest
		FROM (`+unshippedSummary+`) u`).
		Scan(&o.HeldReservations, &o.OverdueHolds, &o.RelayLagSeconds, &o.UnshippedOrders, &o.UnshippedUnits, &o.OldestUnshippedSeconds)
	return o, wrap("OperationsSnapshot", err)
}

// unshippedSummary is the orders waiting to ship from on-shipment locations
// (orders, units, seconds since the oldest was confirmed), read from
// order_lines_unshipped_idx: an on-confirm shop's lines are not in it.
const unshippedSummary = `
	SELECT count(DISTINCT ol.order_id)::int AS orders, coalesce(sum(` + inHandSQL + `), 0)::int AS units,
	       coalesce(extract(epoch FROM now() - min(o.created_at)), 0)::float8 AS oldest
	FROM order_lines ol JOIN orders o ON o.id = ol.order_id WHERE ` + unshippedSQL
