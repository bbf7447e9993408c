package app

import (
	"context"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/events"
	"inventory/metrics"
	"inventory/migrations"
)

// readiness is /readyz's check: why this instance should not take traffic.
//
// /readyz answers anyone, so the reason is in words that name no host,
// port, user, database or SQL (a pgx error names them all: "failed to
// connect to `user=… database=…`: 10.0.0.5:5432 …"). What is behind it goes
// to the log when it changes (the kind of reason, or the error), not at
// every probe, and to inventory_readiness_failures_total.
type readiness struct {
	broker  *events.Broker
	pool    *pgxpool.Pool
	logger  *slog.Logger
	metrics *metrics.Metrics

	mu   sync.Mutex
	last string // the kind of the last answer's reason and its error; "" ready
}

func (r *readiness) check(ctx context.Context) (string, error) {
	reason, kind, err := r.why(ctx)
	if kind != "" {
		r.metrics.NotReady(kind)
	}
	// The first error after a database goes away is often not the one that
	// lasts (a terminated session, then refused connections): each new one
	// is logged once.
	last := kind
	if err != nil {
		last += ": " + err.Error()
	}
	r.mu.Lock()
	changed := last != r.last
	r.last = last
	r.mu.Unlock()
	switch {
	case changed && kind == "":
		r.logger.InfoContext(ctx, "ready")
	case changed && err != nil:
		r.logger.WarnContext(ctx, "not ready", "reason", reason, "err", err)
	case changed:
		r.logger.WarnContext(ctx, "not ready", "reason", reason)
	}
	return reason, nil
}

// why is the reason, its kind (a metric label) and the error behind it:
// the database does not answer, it is not migrated to what this binary
// expects, or live events do not flow (the broker logs its own errors).
// The database comes first: when it is down, that is what is wrong, not
// the events that cannot be read from it.
func (r *readiness) why(ctx context.Context) (reason, kind string, err error) {
	if err := r.pool.Ping(ctx); err != nil {
		return "database unreachable", "database", err
	}
	pending, err := migrations.Pending(ctx, r.pool)
	if err != nil {
		return "cannot read the database's schema version", "database", err
	}
	if pending != "" {
		return pending, "migrations", nil
	}
	if problem := r.broker.Problem(); problem != "" {
		return problem, "events", nil
	}
	return "", "", nil
}
