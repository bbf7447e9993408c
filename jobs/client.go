// Package jobs holds the River workers and builds the River client that runs
// them. Periodic jobs run once across all server instances: River's leader
// election picks one instance to schedule them.
package jobs

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"inventory/domain"
	"inventory/tracing"
	"inventory/webhooks"
)

// Config says what the workers need and how often periodic work runs.
type Config struct {
	Reconciler   domain.Reconciler
	Expirer      Expirer
	Sweeper      Sweeper
	EventsPruner EventsPruner
	// EventsRetention is how long published stock events are kept.
	EventsRetention time.Duration
	// RetentionPruner, if set, prunes code-reveal audit rows older than
	// CodeRevealRetention and webhook delivery log rows older than
	// WebhookDeliveryRetention, hourly; OnPruned, if set, is told each
	// batch's deletions by table.
	RetentionPruner          RetentionPruner
	CodeRevealRetention      time.Duration
	WebhookDeliveryRetention time.Duration
	OnPruned                 func(table string, n int)
	Logger                   *slog.Logger
	// Tracing, when on, traces every job inserted and worked (riverTracing);
	// nil is off.
	Tracing           *tracing.Tracing
	ReconcileInterval time.Duration
	SweepInterval     time.Duration
	// SweepGrace is how overdue a hold must be before the sweeper takes it
	// from its expiry job.
	SweepGrace time.Duration
	// OnSweep, if set, is told how many holds each sweeper pass released.
	OnSweep func(released int)
	// OnReconcile, if set, is told how many issues each reconciliation
	// pass found.
	OnReconcile func(issues int)
	MaxWorkers  int
	// Webhooks, if set, delivers outbound webhooks (WebhookDeliverWorker);
	// a WebhookDispatcher starts the deliveries.
	Webhooks            WebhookStore
	WebhookAllowPrivate bool
	// WebhookLookup, if set, resolves webhook target names (tests: a name
	// that resolves to any address); Go code only, never configuration.
	WebhookLookup webhooks.Lookup
	// WebhookBackoff, if set, replaces River's retry policy for deliveries
	// (tests); WebhookPauseAfter (WebhookMaxAttempts when zero) consecutive
	// failures pause an endpoint.
	WebhookBackoff    func(attempt int) time.Duration
	WebhookPauseAfter int
	// OnWebhookAttempt, if set, is told each delivery attempt's outcome.
	OnWebhookAttempt func(ok bool, latency time.Duration)
	// SoftStopTimeout is how long Stop lets running jobs finish before it
	// cancels them (defaultSoftStop when zero). Every worker stops
	// cleanly on cancel: expiry and sweeps roll back, a webhook delivery
	// leaves its cursor where the last 2xx put it.
	SoftStopTimeout time.Duration
}

// RescueStuckJobsAfter is how long a job may be running before River takes
// it as abandoned by an instance that died (kill -9, lost machine) and runs
// it again. River's default is an hour, which after a crash would hold an
// endpoint's webhook deliveries (one running job per endpoint, see
// webhookUniqueStates) and a hold's expiry job for that long. Every worker's
// timeout is below it: River's JobTimeout (1 min) and WebhookDeliverWorker's
// (webhookRunFor + 2 attempts, 50 s), so a job still at work is never taken.
const RescueStuckJobsAfter = 2 * time.Minute

const defaultSoftStop = 5 * time.Second

// fetchPollInterval is how often River looks for jobs that became due.
// An expiry job is inserted to run at its hold's deadline, later than its
// insert, so no notification announces it: it starts at the first poll
// after the deadline. River's default (1 s) made that half a second late
// on average, and as late for the first set of a storm; a poll is one
// index probe of river_job.
const fetchPollInterval = 200 * time.Millisecond

// NewClient returns a River client with every worker registered. Start it to
// work jobs; an unstarted client can still insert them.
func NewClient(pool *pgxpool.Pool, cfg Config) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	// AddWorker panics only on a kind registered twice: a programming error.
	river.AddWorker(workers, &ReconcileWorker{Reconciler: cfg.Reconciler, Logger: cfg.Logger, OnReconcile: cfg.OnReconcile})
	river.AddWorker(workers, &ExpiryWorker{Expirer: cfg.Expirer})
	river.AddWorker(workers, &WaitlistExpiryWorker{Expirer: cfg.Expirer})
	river.AddWorker(workers, &PruneEventsWorker{Pruner: cfg.EventsPruner, Keep: cfg.EventsRetention, Logger: cfg.Logger})
	river.AddWorker(workers, &SweepWorker{Sweeper: cfg.Sweeper, Logger: cfg.Logger,
		Grace: cfg.SweepGrace, BatchSize: 100, MaxBatches: 50, OnSweep: cfg.OnSweep})
	periodic := []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(cfg.ReconcileInterval),
			func() (river.JobArgs, *river.InsertOpts) { return ReconcileArgs{}, nil },
			&river.PeriodicJobOpts{ID: "reconcile", RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(cfg.SweepInterval),
			func() (river.JobArgs, *river.InsertOpts) { return SweepArgs{}, nil },
			&river.PeriodicJobOpts{ID: "reservation_sweep", RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return PruneEventsArgs{}, nil },
			&river.PeriodicJobOpts{ID: "stock_events_prune", RunOnStart: true}),
	}
	if cfg.RetentionPruner != nil {
		river.AddWorker(workers, &PruneRetentionWorker{Pruner: cfg.RetentionPruner, CodeReveals: cfg.CodeRevealRetention,
			WebhookDeliveries: cfg.WebhookDeliveryRetention, OnPruned: cfg.OnPruned, Logger: cfg.Logger})
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return PruneRetentionArgs{}, nil },
			&river.PeriodicJobOpts{ID: "retention_prune", RunOnStart: true}))
	}
	if cfg.Webhooks != nil {
		river.AddWorker(workers, &WebhookDeliverWorker{Store: cfg.Webhooks, AllowPrivate: cfg.WebhookAllowPrivate, Lookup: cfg.WebhookLookup,
			Backoff: cfg.WebhookBackoff, PauseAfter: cfg.WebhookPauseAfter, OnAttempt: cfg.OnWebhookAttempt, Logger: cfg.Logger})
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:               slog.New(quietHandler{cfg.Logger.Handler()}),
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.MaxWorkers}},
		FetchPollInterval:    fetchPollInterval,
		Workers:              workers,
		PeriodicJobs:         periodic,
		RescueStuckJobsAfter: RescueStuckJobsAfter,
		SoftStopTimeout:      cmp.Or(cfg.SoftStopTimeout, defaultSoftStop),
		Middleware:           riverTracing(cfg.Tracing),
	})
	if err != nil {
		return nil, fmt.Errorf("jobs: new client: %w", err)
	}
	return client, nil
}
