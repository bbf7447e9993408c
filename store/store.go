// Package store is the only package that writes SQL. Each exported method is one
// transaction (or one statement), so a method either happens whole or not at all;
// callers never see or open transactions.
//
// Row locks are always FOR NO KEY UPDATE (no key ever changes): unlike FOR
// UPDATE it does not conflict with the FOR KEY SHARE lock a foreign-key check
// takes, so an insert referencing a balance or reservation never deadlocks with
// the transaction that holds it. Balance rows are locked in (sku, location)
// order by every writer.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"inventory/codecrypt"
)

// Store implements the domain services on PostgreSQL.
type Store struct {
	pool *pgxpool.Pool
	// maxAttempts bounds how often a transaction that lost a deadlock or a
	// serialization race is run again.
	maxAttempts int
	// reserveBatches coalesces concurrent single-line reserves.
	reserveBatches *reserveCoalescer
	batchStats     batchCounters
	// confirmBatches coalesces concurrent confirms.
	confirmBatches *confirmCoalescer
	confirmStats   batchCounters
	// Keyring seals and opens unit codes. Without it, code imports and reveals
	// fail; quantity stock works.
	Keyring *codecrypt.Keyring
	// Expiry schedules the jobs that expire holds, inside the reserve and
	// extend transactions. Without it, reserving and extending fail; every
	// other method works.
	Expiry ExpiryScheduler
	// WebhookAllowPrivate lets webhook URLs name loopback and private addresses.
	WebhookAllowPrivate bool
	// Logger receives what the store reports on its own (a batch that
	// panicked); nil is slog.Default().
	Logger *slog.Logger
	// Tracer makes the spans of coalesced batches and of the requests'
	// waits for them; nil makes none.
	Tracer trace.Tracer

	// batchHook, when set (by tests only), runs inside every reserve and
	// confirm batch's transaction, after its first statements: a fault
	// injected there shows what a batch failing midway leaves behind.
	batchHook atomic.Pointer[func(kind string, requests int)]
	// hooks are told about waitlist offers (SetWaitlistHooks).
	hooks atomic.Pointer[WaitlistHooks]
	// afterCommit holds, per transaction inTx is running, the reports to
	// make once it commits (reportAfterCommit).
	afterCommit sync.Map
}

// New returns a Store on pool. Set Expiry before it makes holds.
func New(pool *pgxpool.Pool) *Store {
	s := &Store{pool: pool, maxAttempts: 8}
	s.reserveBatches = newCoalescer("reserve", reserveBatchLeaders, reserveBatchMax, reserveBatchTimeout, s.logger, s.runReserveBatch)
	s.confirmBatches = newCoalescer("confirm", confirmBatchLeaders, confirmBatchMax, confirmBatchTimeout, s.logger, s.runConfirmBatch)
	// A panicking batch is a batch that failed as a whole: the metrics'
	// inventory_*_batch_failures_total count it with the others.
	s.reserveBatches.panicked = func() { s.batchStats.batches.Add(1); s.batchStats.failed.Add(1) }
	s.confirmBatches.panicked = func() { s.confirmStats.batches.Add(1); s.confirmStats.failed.Add(1) }
	s.reserveBatches.tracer, s.confirmBatches.tracer = s.tracer, s.tracer
	return s
}

// tracer is Tracer, or OpenTelemetry's no-op tracer without one.
func (s *Store) tracer() trace.Tracer {
	if s.Tracer != nil {
		return s.Tracer
	}
	return noop.Tracer{}
}

func (s *Store) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// inBatch runs the test hook, if any (see batchHook).
func (s *Store) inBatch(kind string, requests int) {
	if h := s.batchHook.Load(); h != nil {
		(*h)(kind, requests)
	}
}

// inTx runs fn in one transaction and commits it. A deadlock (40P01) or
// serialization failure (40001) rolls back and runs fn again, with jittered
// backoff, at most maxAttempts times: fn must therefore be safe to repeat, which
// it is because it only talks to the database through tx.
//
// So does an offer that needed a lock another transaction held
// (errOfferBusy, waitlist_offer.go): the next attempt takes the checkouts'
// locks it names first, before fn locks any row, in the order every
// reserve takes them (queueCheckoutUsage), so it waits for their holders
// instead of finding them taken again.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	var err error
	var checkouts []string
	for attempt := 1; ; attempt++ {
		var cur pgx.Tx
		run := &commitReports{checkouts: checkouts, final: attempt >= s.maxAttempts}
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			cur = tx
			s.afterCommit.Store(tx, run)
			if len(checkouts) > 0 {
				if _, err := tx.Exec(ctx, lockCheckoutsStatement, checkouts, checkoutLockSpace); err != nil {
					return err
				}
			}
			return fn(tx)
		})
		s.reportCommitted(cur, err == nil) // what fn counted, once it committed (waitlist_stats.go)
		if more, ok := isOfferBusy(err); ok {
			checkouts = slices.Compact(slices.Sorted(slices.Values(append(checkouts, more...))))
		}
		if err == nil || !retryable(err) || attempt >= s.maxAttempts {
			return err
		}
		if err := retryBackoff(ctx, attempt, err); err != nil {
			return err
		}
	}
}

// retryBackoff waits before attempt+1 of a transaction that failed with err
// (jittered, growing with attempt), so that the transactions that deadlocked
// do not meet again at once; it returns err joined with ctx's if ctx ends
// first.
func retryBackoff(ctx context.Context, attempt int, err error) error {
	backoff := time.Duration(attempt*attempt) * time.Millisecond
	backoff += rand.N(backoff + time.Millisecond)
	select {
	case <-ctx.Done():
		return errors.Join(err, ctx.Err())
	case <-time.After(backoff):
		return nil
	}
}

// Postgres error codes the store reacts to.
const (
	pgDeadlock             = "40P01"
	pgSerializationFailure = "40001"
	pgUniqueViolation      = "23505"
	pgNumericOutOfRange    = "22003"
	pgCheckViolation       = "23514"
)

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func retryable(err error) bool {
	if _, ok := isOfferBusy(err); ok {
		return true
	}
	c := pgCode(err)
	return c == pgDeadlock || c == pgSerializationFailure
}

// wrap adds the operation's name to unexpected errors so logs say where they
// came from; domain errors pass through unchanged for the API to present.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("store.%s: %w", op, err)
}
