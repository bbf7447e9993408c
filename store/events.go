package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

var _ domain.StockEvents = (*Store)(nil)

// relayLock makes one relay at a time, across all instances, assign seq.
const relayLock = RelayLockKey

// RelayLockKey is the advisory lock key (pg_advisory_xact_lock's bigint)
// that the relay holds while it assigns seq: what on-call looks for in
// pg_locks when the stream stalls (docs/operations/failure-modes.md, "The stream stalls"), and what the tests
// that freeze or imitate a holder take.
const RelayLockKey int64 = 0x1_4E5E_47_E7E7

// StockEventsPublish is one relay tick. Writers insert events without seq,
// in their own transactions, which commit in any order; this assigns seq to
// the events that have committed since the last tick, in one transaction that
// holds an advisory lock, as last+1, +2, … in id order (last is the newest
// seq assigned, kept in stock_events_head), and notifies listeners once for
// the whole batch.
//
// Why readers never see a gap: seq values become visible only when a relay
// transaction commits, and relay transactions run one after another (the
// second takes the lock after the first committed, and the head it reads is
// the one the first moved). A snapshot therefore sees seq 1..M for some M, never M+2
// without M+1, and an event that committed late simply gets a later seq; it
// cannot be skipped by a reader that already passed its position, because no
// position is handed out before the event is visible. Writers pay one INSERT
// and never NOTIFY (a NOTIFY per commit serializes every committing writer on
// one global lock).
//
// It returns how many events it published; 0 when another instance's relay
// holds the lock.
func (s *Store) StockEventsPublish(ctx context.Context, limit int) (int, error) {
	n, _, err := s.StockEventsRelay(ctx, limit, DefaultRelayTimeout)
	return n, err
}

// DefaultRelayTimeout is StockEventsRelay's bound when the caller has no
// setting of its own (INVENTORY_EVENTS_RELAY_TIMEOUT's default).
const DefaultRelayTimeout = 5 * time.Second

// StockEventsRelay is StockEventsPublish that also returns the head after
// it: Seq the newest seq (the payload of the NOTIFY it sent, by which a
// broker tells its own publishes from another instance's) and, when it took
// every waiting event, CaughtUp the instant before it began, by which every
// change was published through Seq. A zero head: another relay held the
// lock.
//
// The lock lives as long as the transaction, and the transaction as long as
// the client that runs it lets it: an instance frozen inside it (SIGSTOP, a
// long GC pause, a hung VM) would keep it, and with it every instance's
// relay, for as long as it stays frozen, while every /readyz says 200. So the
// transaction carries its own bounds, set for it alone (SET LOCAL, which a
// transaction pooler keeps within the transaction): each statement and each
// lock wait at most timeout, and each pause between statements at most
// timeout, after which PostgreSQL ends the session
// (idle_in_transaction_session_timeout), the transaction rolls back (the
// seqs it assigned were never visible) and the lock is free for another
// instance. The relay's statements take milliseconds, so a healthy relay
// never comes near it.
func (s *Store) StockEventsRelay(ctx context.Context, limit int, timeout time.Duration) (n int, head domain.StockHead, err error) {
	if timeout <= 0 {
		timeout = DefaultRelayTimeout
	}
	bound := strconv.FormatInt(max(timeout.Milliseconds(), 1), 10)
	started := time.Now()
	// READ COMMITTED explicitly, whatever the server default: each statement
	// must take its snapshot after the lock is held, so the head it reads is
	// the previous relay's.
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		n, head = 0, domain.StockHead{}
		// The plan of every statement here must not depend on statistics:
		// on a new database they are taken while stock_events is nearly
		// empty, and a join planned on them (a nested loop over whole-table
		// scans) stays in the prepared statement's cache, so each tick would
		// read the table once per event and the relay fall ever further
		// behind under load. So there is no join, and the scans are forced
		// onto the indexes for this transaction.
		//
		// Disabling seq scans prices the one-row stock_events_head's scan
		// at 10^10, which puts every statement here past jit_above_cost:
		// each tick would then compile its plans with LLVM (inlining and
		// optimization included), which under load takes far longer than
		// the batch and becomes the relay's lag. So JIT is off here too.
		//
		// The bounds are set in the statement that takes the lock, so no
		// pause of this transaction while it holds the lock is unbounded
		// (the statement itself does not wait: a try-lock).
		var locked bool
		if err := tx.QueryRow(ctx, `
			SELECT pg_try_advisory_xact_lock($1),
			       set_config('enable_seqscan', 'off', true) IS NOT NULL, set_config('jit', 'off', true) IS NOT NULL,
			       set_config('idle_in_transaction_session_timeout', $2, true) IS NOT NULL,
			       set_config('statement_timeout', $2, true) IS NOT NULL, set_config('lock_timeout', $2, true) IS NOT NULL`,
			int64(relayLock), bound).Scan(&locked, new(bool), new(bool), new(bool), new(bool), new(bool)); err != nil || !locked {
			return err
		}
		var base int64
		var ids []int64
		if err := tx.QueryRow(ctx, `
			SELECT (SELECT last_seq FROM stock_events_head),
			       array(SELECT id FROM stock_events WHERE seq IS NULL ORDER BY id LIMIT $1)`, limit).Scan(&base, &ids); err != nil {
			return err
		}
		if len(ids) == 0 {
			head = domain.StockHead{Seq: base, CaughtUp: started}
			return nil
		}
		// ids is ascending, so the k-th id (1-based) gets base + k.
		//
		// A batch that took fewer than limit ids took every event that had
		// committed before this statement's snapshot, so every change
		// committed before this transaction began (now()) is then published:
		// complete_at says so (see AvailabilityHead).
		if err := tx.QueryRow(ctx, `
			WITH published AS (
				UPDATE stock_events SET seq = $2 + array_position($1::bigint[], id), published_at = now()
				WHERE id = ANY($1::bigint[])
				RETURNING seq
			), head AS (
				UPDATE stock_events_head SET last_seq = (SELECT max(seq) FROM published),
				       complete_at = CASE WHEN $4 THEN now() ELSE complete_at END
			)
			SELECT count(*), max(seq), pg_notify($3, max(seq)::text) IS NOT NULL FROM published`,
			ids, base, domain.StockEventsChannel, len(ids) < limit).Scan(&n, &head.Seq, new(bool)); err != nil {
			return err
		}
		if n != len(ids) {
			return fmt.Errorf("published %d of %d events", n, len(ids))
		}
		if len(ids) < limit {
			head.CaughtUp = started
		}
		return nil
	})
	if err != nil {
		return 0, domain.StockHead{}, wrap("StockEventsPublish", err)
	}
	head.At = time.Now()
	if head.Seq == 0 && head.CaughtUp.IsZero() {
		head.At = time.Time{}
	}
	return n, head, nil
}

// StockEventsAfter returns up to limit published events with seq > after, in
// order. A cursor older than the retained events is *domain.ErrCursorExpired.
func (s *Store) StockEventsAfter(ctx context.Context, after int64, limit int) ([]domain.StockEvent, error) {
	events, _, err := s.stockEventsAfter(ctx, after, limit, false)
	return events, wrap("StockEventsAfter", err)
}

// StockEventsFetch is StockEventsAfter that also reads, in the same snapshot,
// the head and how stale a reader that has applied through it can be (see
// AvailabilityHead). A broker's fetch of new events learns both in the one
// transaction it runs anyway, and the availability copy takes the head from
// there instead of asking for it again after every fetch (one more query
// per fetch per instance, a large share of what an idle instance sends).
func (s *Store) StockEventsFetch(ctx context.Context, after int64, limit int) ([]domain.StockEvent, domain.StockHead, error) {
	events, head, err := s.stockEventsAfter(ctx, after, limit, true)
	head.At = time.Now()
	return events, head, wrap("StockEventsFetch", err)
}

func (s *Store) stockEventsAfter(ctx context.Context, after int64, limit int, withHead bool) ([]domain.StockEvent, domain.StockHead, error) {
	var head domain.StockHead
	if after < 0 {
		return nil, head, domain.Limitf("after must not be negative")
	}
	if limit < 1 || limit > domain.MaxStockEventsPage {
		return nil, head, domain.Limitf("first must be between 1 and %d", domain.MaxStockEventsPage)
	}
	var events []domain.StockEvent
	started := time.Now()
	err := pgx.BeginTxFunc(ctx, s.pool, readTx, func(tx pgx.Tx) error {
		var pruned int64
		if withHead {
			// A statement of its own: joined to stock_events_pruned in one
			// statement, its plan is slow under many concurrent writers,
			// and every subscriber's events would wait for it.
			var secs float64
			if err := tx.QueryRow(ctx, headLag).Scan(&head.Seq, &secs); err != nil {
				return err
			}
			head.CaughtUp = started.Add(-time.Duration(secs * float64(time.Second)))
		}
		if err := tx.QueryRow(ctx, `SELECT through_seq FROM stock_events_pruned`).Scan(&pruned); err != nil {
			return err
		}
		if after < pruned {
			return &domain.ErrCursorExpired{After: after, OldestKept: pruned}
		}
		// The statement is the function's (migration 00019), planned once
		// per server connection also through a transaction pooler; it
		// reads in this transaction's snapshot.
		rows, err := tx.Query(ctx, `SELECT * FROM inventory_stock_events_after($1::bigint, $2::int)`, after, limit)
		if err != nil {
			return err
		}
		events, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.StockEvent, error) {
			var e domain.StockEvent
			var cause string
			err := r.Scan(&e.Seq, &e.SKU, &e.Location, &cause, &e.OnHand, &e.Reserved, &e.Committed, &e.At, &e.ReservationID, &e.CheckoutID)
			e.Cause = domain.StockEventCause(strings.ToUpper(cause))
			return e, err
		})
		return err
	})
	return events, head, err
}

// StockEventsLatest is the newest published seq (0 when there is none): where
// a live subscription without a cursor starts.
func (s *Store) StockEventsLatest(ctx context.Context) (int64, error) {
	var seq int64
	err := s.pool.QueryRow(ctx, `SELECT last_seq FROM stock_events_head`).Scan(&seq)
	return seq, wrap("StockEventsLatest", err)
}

// StockEventsPrune deletes events published longer than keep ago. Publish
// time grows with seq, so that is a prefix of the sequence and the kept events
// stay gap-free; it records how far it pruned so that older cursors are told
// to resync. It returns how many events it deleted.
func (s *Store) StockEventsPrune(ctx context.Context, keep time.Duration) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var through *int64
		if err := tx.QueryRow(ctx, `SELECT max(seq) FROM stock_events WHERE seq IS NOT NULL AND published_at < now() - make_interval(secs => $1)`,
			keep.Seconds()).Scan(&through); err != nil || through == nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM stock_events WHERE seq <= $1`, *through)
		if err != nil {
			return err
		}
		n = int(tag.RowsAffected())
		_, err = tx.Exec(ctx, `UPDATE stock_events_pruned SET through_seq = greatest(through_seq, $1)`, *through)
		return err
	})
	return n, wrap("StockEventsPrune", err)
}
