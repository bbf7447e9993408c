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
		var err error
		if snap.Locations, err = readLocations(ctx, tx); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM skus`).Scan(&snap.SKUMaxID); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT code FROM skus`)
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
			err := r.Scan(&b.SKU, &b.Location, &b.OnHand, &b.Reserved, &b.Committed, &b.PendingSupply, &b.Preordered, &b.UpdatedAt, &b.Seq)
			return b, err
		})
		return err
	})
	snap.At = started
	return snap, wrap("AvailabilitySnapshot", err)
}

// AvailabilityCatalogSince says how the catalog differs from what a copy
// knows: knownSKUs SKU codes, the newest of id afterID, as of its last
// load or check. SKUs are never deleted, so an equal count means the same
// SKUs, and this costs one count of the SKUs (10 ms at 100,000), not a
// read, transfer and merge of every code: a copy asks it at most once per
// CatalogInterval,
// and only while queries name codes it does not know. A grown count reads
// the SKUs after afterID; if they do not make up the difference (a SKU
// with a lower id committed after the copy's last read), every code, with
// Full set. Locations are few and always read whole. At is the clock
// before the transaction began: every SKU and location committed before At
// is in the answer.
func (s *Store) AvailabilityCatalogSince(ctx context.Context, knownSKUs int, afterID int64) (domain.CatalogChange, error) {
	var ch domain.CatalogChange
	started := time.Now()
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		ch = domain.CatalogChange{}
		var err error
		if ch.Locations, err = readLocations(ctx, tx); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(max(id), 0) FROM skus`).Scan(&ch.SKUs, &ch.MaxID); err != nil {
			return err
		}
		if ch.SKUs == knownSKUs {
			return nil
		}
		rows, err := tx.Query(ctx, `SELECT code FROM skus WHERE id > $1`, afterID)
		if err != nil {
			return err
		}
		if ch.New, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		if knownSKUs+len(ch.New) == ch.SKUs {
			return nil
		}
		ch.Full = true
		rows, err = tx.Query(ctx, `SELECT code FROM skus`)
		if err != nil {
			return err
		}
		ch.New, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	ch.At = started
	return ch, wrap("AvailabilityCatalogSince", err)
}

func readLocations(ctx context.Context, tx pgx.Tx) ([]domain.Location, error) {
	rows, err := tx.Query(ctx, `SELECT code, priority FROM locations`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.Location, error) {
		var l domain.Location
		return l, r.Scan(&l.Code, &l.Priority)
	})
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
