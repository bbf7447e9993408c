package jobs

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"inventory/store"
	"inventory/tracing"
)

// ReservationExpiryArgs is the River job that expires one hold at its
// deadline. It is inserted in the reserve transaction (and again when a hold
// is shortened) by Scheduler; ExpiryWorker works it.
type ReservationExpiryArgs struct {
	ReservationID string `json:"reservation_id"`
}

// Kind names the job in River's tables. Jobs already in databases carry it:
// it must never change.
func (ReservationExpiryArgs) Kind() string { return "reservation_expiry" }

// Scheduler inserts expiry jobs inside a store's transactions with an
// insert-only River client: it never works jobs (NewClient's client does).
// It is the store.ExpiryScheduler of every store.
type Scheduler struct {
	river *river.Client[pgx.Tx]
}

var _ store.ExpiryScheduler = (*Scheduler)(nil)

// NewScheduler returns a Scheduler for stores on pool, whose inserts are
// traced when tr is on.
func NewScheduler(pool *pgxpool.Pool, tr *tracing.Tracing) (*Scheduler, error) {
	inserter, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Middleware: riverTracing(tr)})
	if err != nil {
		return nil, fmt.Errorf("jobs: new scheduler: %w", err)
	}
	return &Scheduler{river: inserter}, nil
}

// ScheduleExpiryTx inserts one expiry job per hold, scheduled at its
// deadline, in tx and in one insert.
func (s *Scheduler) ScheduleExpiryTx(ctx context.Context, tx pgx.Tx, holds []store.HoldDeadline) error {
	if len(holds) == 0 {
		return nil
	}
	params := make([]river.InsertManyParams, len(holds))
	for i, h := range holds {
		params[i] = river.InsertManyParams{Args: ReservationExpiryArgs{ReservationID: h.ReservationID},
			InsertOpts: &river.InsertOpts{ScheduledAt: h.At, Metadata: holdMetadata(h)}}
	}
	_, err := s.river.InsertManyTx(ctx, tx, params)
	return err
}

// WaitlistExpiryArgs is the River job that expires one waitlist entry at the
// end of its TTL. It is inserted in the join transaction by Scheduler;
// WaitlistExpiryWorker works it.
type WaitlistExpiryArgs struct {
	EntryID string `json:"entry_id"`
}

// Kind names the job in River's tables: it must never change.
func (WaitlistExpiryArgs) Kind() string { return "waitlist_expiry" }

// ScheduleWaitlistExpiryTx inserts one expiry job per entry, scheduled at
// its deadline, in tx and in one insert.
func (s *Scheduler) ScheduleWaitlistExpiryTx(ctx context.Context, tx pgx.Tx, entries []store.EntryDeadline) error {
	if len(entries) == 0 {
		return nil
	}
	params := make([]river.InsertManyParams, len(entries))
	for i, e := range entries {
		params[i] = river.InsertManyParams{Args: WaitlistExpiryArgs{EntryID: e.EntryID}, InsertOpts: &river.InsertOpts{ScheduledAt: e.At}}
	}
	_, err := s.river.InsertManyTx(ctx, tx, params)
	return err
}
