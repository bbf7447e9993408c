package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
)

// RetentionPruner deletes old audit and log rows in bounded batches.
// store.Store is one.
type RetentionPruner interface {
	CodeRevealsPrune(ctx context.Context, keep time.Duration, limit int) (int, error)
	WebhookDeliveriesPrune(ctx context.Context, keep time.Duration, limit int) (int, error)
}

// Retention pass bounds: each DELETE takes at most RetentionBatch rows (one
// short transaction), and a pass stops after retentionRunFor; what is left
// waits for the next hourly pass, which goes on from the oldest rows.
const (
	RetentionBatch  = 1000
	retentionRunFor = 30 * time.Second // below River's JobTimeout (1 min)
)

// Tables the retention job prunes, as OnPruned names them.
const (
	TableCodeReveals       = "code_reveals"
	TableWebhookDeliveries = "webhook_deliveries"
)

// PruneRetentionArgs asks for one retention pass over code-reveal audit rows
// and webhook delivery logs.
type PruneRetentionArgs struct{}

// Kind names the job in River's tables.
func (PruneRetentionArgs) Kind() string { return "retention_prune" }

// PruneRetentionWorker keeps code-reveal audit rows for CodeReveals and
// webhook delivery log rows for WebhookDeliveries, deleting older ones
// oldest first, Batch rows (RetentionBatch when zero) per transaction, for
// at most RunFor (retentionRunFor when zero) per pass.
type PruneRetentionWorker struct {
	river.WorkerDefaults[PruneRetentionArgs]
	Pruner            RetentionPruner
	CodeReveals       time.Duration
	WebhookDeliveries time.Duration
	Batch             int
	RunFor            time.Duration
	// OnPruned, if set, is told each batch's deletions by table (metrics).
	OnPruned func(table string, n int)
	Logger   *slog.Logger
}

// Work runs one pass over both tables.
func (w *PruneRetentionWorker) Work(ctx context.Context, _ *river.Job[PruneRetentionArgs]) error {
	batch, runFor := w.Batch, w.RunFor
	if batch <= 0 {
		batch = RetentionBatch
	}
	if runFor <= 0 {
		runFor = retentionRunFor
	}
	until := time.Now().Add(runFor)
	for _, t := range []struct {
		table string
		keep  time.Duration
		prune func(context.Context, time.Duration, int) (int, error)
	}{
		{TableCodeReveals, w.CodeReveals, w.Pruner.CodeRevealsPrune},
		{TableWebhookDeliveries, w.WebhookDeliveries, w.Pruner.WebhookDeliveriesPrune},
	} {
		total, more := 0, true
		for more && time.Now().Before(until) {
			n, err := t.prune(ctx, t.keep, batch)
			if err != nil {
				return fmt.Errorf("prune %s: %w", t.table, err)
			}
			if w.OnPruned != nil && n > 0 {
				w.OnPruned(t.table, n)
			}
			total, more = total+n, n == batch
		}
		w.Logger.InfoContext(ctx, "pruned old rows", "table", t.table, "deleted", total, "keep", t.keep, "more", more)
	}
	return nil
}
