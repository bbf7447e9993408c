package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// AvailabilitySnapshot reads everything an in-memory availability copy
// needs, in one REPEATABLE READ snapshot: every SKU code, every location
// with its priority, every balance with the seq of the newest published
// event on it, the newest published seq, and how long the oldest committed
// but unpublished event has waited (its staleness at the snapshot). Events
// after Seq then carry the copy forward; the ones that committed before the
// snapshot but get their seq after it only set values the snapshot already
// holds (or an intermediate one, until their successor is applied). At is
// this process's clock before the transaction began, so a copy measures its
// age from the snapshot, not from when it finished installing it.
func (s *Store) AvailabilitySnapshot(ctx context.Context) (domain.AvailabilitySnapshot, error) {
	var snap domain.AvailabilitySnapshot
	// Before BEGIN: the snapshot is taken at the first statement, later,
	// so everything committed before this is in it.
	started := time.Now()
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		snap = domain.AvailabilitySnapshot{}
		var lag float64
		if err := tx.QueryRow(ctx, headLag).
			Scan(&snap.Seq, &lag); err != nil {
			return err
		}
		snap.Lag = time.Duration(lag * float64(time.Second))
		rows, err := tx.Query(ctx, `SELECT code, priority FROM locations`)
		if err != nil {
			return err
		}
		if snap.Locations, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.Location, error) {
			var l domain.Location
			return l, r.Scan(&l.Code, &l.Priority)
		}); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT code FROM skus`)
		if err != nil {
			return err
		}
		if snap.SKUs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		// The newest seq per balance comes from stock_events_balance_seq_idx
		// (one index probe per balance); 0 when its events were pruned.
		rows, err = tx.Query(ctx, `
			SELECT `+balanceColumns+`,
			       coalesce((SELECT max(e.seq) FROM stock_events e
			                 WHERE e.sku_id = b.sku_id AND e.location_id = b.location_id AND e.seq IS NOT NULL), 0)
			FROM balances b JOIN skus s ON s.id = b.sku_id JOIN locations l ON l.id = b.location_id`)
		if err != nil {
			return err
		}
		snap.Balances, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.SeqBalance, error) {
			var b domain.SeqBalance
			err := r.Scan(&b.SKU, &b.Location, &b.OnHand, &b.Reserved, &b.PendingSupply, &b.Preordered, &b.UpdatedAt, &b.Seq)
			return b, err
		})
		return err
	})
	snap.At = started
	return snap, wrap("AvailabilitySnapshot", err)
}

// AvailabilityCatalog reads every SKU code and every location with its
// priority: how a copy learns of SKUs and locations created since it loaded
// (creating one makes no stock event).
func (s *Store) AvailabilityCatalog(ctx context.Context) (skus []string, locations []domain.Location, err error) {
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT code, priority FROM locations`)
		if err != nil {
			return err
		}
		if locations, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.Location, error) {
			var l domain.Location
			return l, r.Scan(&l.Code, &l.Priority)
		}); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT code FROM skus`)
		if err != nil {
			return err
		}
		skus, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return skus, locations, wrap("AvailabilityCatalog", err)
}

// headLag reads the newest published seq and how stale a reader that has
// applied through it can be (0 when no committed event waits for the
// relay): since the later of the oldest waiting event's time (its writer's
// transaction start, before its commit) and the start of the relay's last
// complete batch (every change committed before it is published, see
// StockEventsPublish). The second is what bounds it under a steady load:
// there is then always an event waiting, whose time counts its writer's
// whole transaction (lock waits included), not staleness.
const headLag = `SELECT h.last_seq,
		       coalesce((SELECT greatest(extract(epoch FROM now() - greatest(e.at, h.complete_at)), 0) FROM stock_events e WHERE e.seq IS NULL ORDER BY e.id LIMIT 1), 0)::float8
		FROM stock_events_head h`

// AvailabilityHead is the newest published seq and how stale a copy that
// has applied through it can be (see headLag), in one statement: with it a
// copy that has applied through the head knows how stale it is.
func (s *Store) AvailabilityHead(ctx context.Context) (seq int64, lag time.Duration, err error) {
	var secs float64
	err = s.pool.QueryRow(ctx, headLag).
		Scan(&seq, &secs)
	return seq, time.Duration(secs * float64(time.Second)), wrap("AvailabilityHead", err)
}

// AvailabilitySupply reads pending supply and pre-ordered counts of the
// given balances (parallel slices of SKU and location codes), with their
// updated_at: the figures stock events do not carry. A copy reads them after applying the
// events that touched those balances, so they are at least as new as the
// events.
func (s *Store) AvailabilitySupply(ctx context.Context, skus, locations []string) ([]domain.Balance, error) {
	// The statement is the function's (migration 00019), planned once per
	// server connection also through a transaction pooler.
	rows, err := s.pool.Query(ctx, `SELECT * FROM inventory_availability_supply($1::text[], $2::text[])`, skus, locations)
	if err != nil {
		return nil, wrap("AvailabilitySupply", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.Balance, error) {
		var b domain.Balance
		return b, r.Scan(&b.SKU, &b.Location, &b.PendingSupply, &b.Preordered, &b.UpdatedAt)
	})
	return out, wrap("AvailabilitySupply", err)
}
