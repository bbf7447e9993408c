package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// WebhookDispatcher starts delivery to every endpoint that is behind the
// stock event stream, once per Interval (1 s when zero), on each instance
// that works jobs. It is a ticker and not a periodic River job so that a
// quiet system writes nothing to River's tables: a tick is one small query,
// and a WebhookDeliverArgs job is inserted only for an endpoint with events
// to send. Delivery jobs are unique per endpoint, so ticks on several
// instances insert one job between them.
type WebhookDispatcher struct {
	Store    WebhookStore
	Client   *river.Client[pgx.Tx]
	Interval time.Duration
	Logger   *slog.Logger
}

// Run dispatches until ctx ends. A failed tick is retried by the next one:
// nothing is lost, the cursors are in the database. Failing ticks (the
// database is down) are logged once when they start and once when they stop,
// not every second.
func (d *WebhookDispatcher) Run(ctx context.Context) {
	interval := d.Interval
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	failed := 0
	for {
		err := d.Dispatch(ctx)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			if failed++; failed == 1 && d.Logger != nil {
				d.Logger.WarnContext(ctx, "webhook dispatch failing; retrying every tick", "error", err)
			}
		case failed > 0:
			if d.Logger != nil {
				d.Logger.InfoContext(ctx, "webhook dispatch recovered", "failed_ticks", failed)
			}
			failed = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Dispatch inserts a delivery job for each endpoint that is behind.
func (d *WebhookDispatcher) Dispatch(ctx context.Context) error {
	ids, err := d.Store.WebhooksDue(ctx)
	if err != nil || len(ids) == 0 {
		return err
	}
	params := make([]river.InsertManyParams, len(ids))
	for i, id := range ids {
		params[i] = river.InsertManyParams{Args: WebhookDeliverArgs{EndpointID: id}}
	}
	_, err = d.Client.InsertMany(ctx, params)
	return err
}
