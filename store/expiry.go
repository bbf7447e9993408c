package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// HoldDeadline is a hold and the moment it expires.
type HoldDeadline struct {
	ReservationID string
	At            time.Time
	// TraceParent is the W3C trace context of the reserve that made the
	// hold, "" when it was not traced: its expiry job's span links back to
	// it, however late the job runs.
	TraceParent string
}

// EntryDeadline is a waitlist entry and the moment it stops waiting.
type EntryDeadline struct {
	EntryID string
	At      time.Time
}

// ExpiryScheduler inserts, inside the caller's transaction, the jobs that
// expire holds at their deadlines, so a job exists exactly when the hold (or
// its new deadline) committed; and likewise the jobs that expire waitlist
// entries, inserted by the join. jobs.Scheduler is one.
type ExpiryScheduler interface {
	ScheduleExpiryTx(ctx context.Context, tx pgx.Tx, holds []HoldDeadline) error
	ScheduleWaitlistExpiryTx(ctx context.Context, tx pgx.Tx, entries []EntryDeadline) error
}

// errNoExpiryScheduler is what a hold is refused with on a store built
// without Expiry: a wiring mistake, reported rather than a nil dereference.
var errNoExpiryScheduler = errors.New("store: no expiry scheduler (Store.Expiry is nil); holds cannot be made or shortened, nor waitlists joined")

// scheduleExpiry schedules the holds' expiry jobs in the caller's
// transaction, all in one insert.
func (s *Store) scheduleExpiry(ctx context.Context, tx pgx.Tx, holds ...HoldDeadline) error {
	if s.Expiry == nil {
		return errNoExpiryScheduler
	}
	if err := s.Expiry.ScheduleExpiryTx(ctx, tx, holds); err != nil {
		return fmt.Errorf("schedule expiry: %w", err)
	}
	return nil
}

// scheduleWaitlistExpiry schedules the entries' expiry jobs in the caller's
// transaction.
func (s *Store) scheduleWaitlistExpiry(ctx context.Context, tx pgx.Tx, entries ...EntryDeadline) error {
	if s.Expiry == nil {
		return errNoExpiryScheduler
	}
	if err := s.Expiry.ScheduleWaitlistExpiryTx(ctx, tx, entries); err != nil {
		return fmt.Errorf("schedule waitlist expiry: %w", err)
	}
	return nil
}

// ReservationExpire expires a hold if it is still held and due (expired
// says it did). If it is held but not yet due (the hold was extended), it
// returns the new deadline and the caller runs again then. Any other state
// means the hold already ended, which is not an error: the job's work is
// done.
func (s *Store) ReservationExpire(ctx context.Context, id string) (notBefore *time.Time, expired bool, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		notBefore, expired = nil, false
		var status string
		var expiresAt time.Time
		err := tx.QueryRow(ctx, `SELECT status, expires_at FROM reservations WHERE id = $1 FOR NO KEY UPDATE`, id).
			Scan(&status, &expiresAt)
		if err != nil || status != "held" {
			return err
		}
		due, err := dueNow(ctx, tx, expiresAt)
		if err != nil {
			return err
		}
		if !due {
			notBefore = &expiresAt
			return nil
		}
		expired = true
		return s.endHolds(ctx, tx, []string{id}, domain.StatusExpired, nil)
	})
	return notBefore, expired, wrap("ReservationExpire", err)
}

// ReservationExpireDue expires up to limit holds that are due now, whichever
// job they belong to, and returns how many. An expiry job calls it after its
// own hold, so when many holds fall due together the first jobs to run end
// them all in sets of limit (one transaction and a handful of statements per
// set), and the other holds' jobs then find their hold ended and finish at
// once. Rows another transaction has locked are skipped (a confirm, release
// or another set has them): a hold is ended by whichever gets it first, and
// only while it is still held, so never twice.
func (s *Store) ReservationExpireDue(ctx context.Context, limit int) (int, error) {
	var n int
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		n, err = s.expireOverdue(ctx, tx, 0, limit)
		return err
	})
	return n, wrap("ReservationExpireDue", err)
}

// ReservationSweepOverdue is the backstop behind the expiry jobs: it expires
// up to limit holds overdue by more than grace, skipping rows another
// transaction has locked (their confirm, release or expiry is under way), and
// records the pass for the health report. It returns how many it expired; a
// non-zero count means expiry jobs are late or lost.
func (s *Store) ReservationSweepOverdue(ctx context.Context, grace time.Duration, limit int) (int, error) {
	var n int
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if n, err = s.expireOverdue(ctx, tx, grace, limit); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO sweeper_runs (released) VALUES ($1)`, n)
		return err
	})
	return n, wrap("ReservationSweepOverdue", err)
}

// expireOverdue locks up to limit held reservations whose deadline passed
// more than grace ago, oldest first, skipping locked ones, and expires them.
func (s *Store) expireOverdue(ctx context.Context, tx pgx.Tx, grace time.Duration, limit int) (int, error) {
	rows, err := tx.Query(ctx, `
		SELECT id FROM reservations
		WHERE status = 'held' AND expires_at < clock_timestamp() - make_interval(secs => $1)
		ORDER BY expires_at
		LIMIT $2
		FOR NO KEY UPDATE SKIP LOCKED`, grace.Seconds(), limit)
	if err != nil {
		return 0, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	return len(ids), s.endHolds(ctx, tx, ids, domain.StatusExpired, nil)
}

// HousekeepingPrune deletes health records older than keep: allocation
// failures and sweeper passes. Reservations, orders and the ledger are kept.
func (s *Store) HousekeepingPrune(ctx context.Context, keep time.Duration) error {
	_, err := s.pool.Exec(ctx, `
		WITH a AS (DELETE FROM allocation_failures WHERE at < now() - make_interval(secs => $1))
		DELETE FROM sweeper_runs WHERE at < now() - make_interval(secs => $1)
		  AND id <> (SELECT max(id) FROM sweeper_runs)`, keep.Seconds())
	return wrap("HousekeepingPrune", err)
}
