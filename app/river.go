package app

import (
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"inventory/config"
	"inventory/jobs"
	"inventory/tracing"
)

// wireJobs builds the River client with every periodic and queued job. It
// is started (or not: INVENTORY_RUN_JOBS=false) by startBackground; an
// instance that does not work jobs still inserts them (its holds' expiry).
func wireJobs(cfg config.Config, db *pools, st stores, live *live, tr *tracing.Tracing, logger *slog.Logger) (*river.Client[pgx.Tx], error) {
	m := live.metrics
	return jobs.NewClient(db.river, jobs.Config{
		Reconciler: st.jobs, Expirer: st.jobs, Sweeper: st.jobs, EventsPruner: st.jobs, EventsRetention: cfg.EventsRetention,
		Logger: logger, MaxWorkers: cfg.JobWorkers, Tracing: tr,
		ReconcileInterval: cfg.ReconcileInterval, SweepInterval: cfg.SweepInterval, SweepGrace: cfg.SweepGrace,
		OnSweep: m.SweptHolds, OnReconcile: m.Reconciled,
		RetentionPruner: st.jobs, CodeRevealRetention: cfg.CodeRevealRetention, WebhookDeliveryRetention: cfg.WebhookDeliveryRetention,
		OnPruned: m.WatchRetention(jobs.TableCodeReveals, jobs.TableWebhookDeliveries),
		Webhooks: st.jobs, WebhookAllowPrivate: cfg.WebhookAllowPrivate, OnWebhookAttempt: m.WatchWebhooks(st.api),
		// Half the shutdown budget for jobs to finish, then they are
		// cancelled, so River has stopped (and recorded every job's end)
		// before the shutdown deadline.
		SoftStopTimeout: cfg.ShutdownTimeout / 2,
	})
}
