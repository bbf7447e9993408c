// Package jobs holds the River workers and builds the River client that runs
// them. Periodic jobs run once across all server instances: River's leader
// election picks one instance to schedule them.
package jobs

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"inventory/domain"
)

// Config says what the workers need and how often periodic work runs.
type Config struct {
	Reconciler        domain.Reconciler
	Logger            *slog.Logger
	ReconcileInterval time.Duration
	MaxWorkers        int
}

// NewClient returns a River client with every worker registered. Start it to
// work jobs; an unstarted client can still insert them.
func NewClient(pool *pgxpool.Pool, cfg Config) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &ReconcileWorker{Reconciler: cfg.Reconciler, Logger: cfg.Logger}); err != nil {
		return nil, fmt.Errorf("jobs: register reconcile: %w", err)
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:  cfg.Logger,
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.MaxWorkers}},
		Workers: workers,
		PeriodicJobs: []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(cfg.ReconcileInterval),
				func() (river.JobArgs, *river.InsertOpts) { return ReconcileArgs{}, nil },
				&river.PeriodicJobOpts{ID: "reconcile", RunOnStart: true}),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("jobs: new client: %w", err)
	}
	return client, nil
}
