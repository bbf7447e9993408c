package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
)

// EventsPruner deletes old published stock events. store.Store is one.
type EventsPruner interface {
	StockEventsPrune(ctx context.Context, keep time.Duration) (int, error)
}

// PruneEventsArgs asks for one retention pass over stock events.
type PruneEventsArgs struct{}

// Kind names the job in River's tables.
func (PruneEventsArgs) Kind() string { return "stock_events_prune" }

// PruneEventsWorker keeps stock events for Keep; clients that fall further
// behind are told to resync from availability.
type PruneEventsWorker struct {
	river.WorkerDefaults[PruneEventsArgs]
	Pruner EventsPruner
	Keep   time.Duration
	Logger *slog.Logger
}

// Work runs one pass.
func (w *PruneEventsWorker) Work(ctx context.Context, _ *river.Job[PruneEventsArgs]) error {
	n, err := w.Pruner.StockEventsPrune(ctx, w.Keep)
	if err != nil {
		return fmt.Errorf("prune stock events: %w", err)
	}
	w.Logger.InfoContext(ctx, "pruned stock events", "deleted", n, "keep", w.Keep)
	return nil
}
