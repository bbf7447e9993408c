package jobs

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/riverqueue/river"

	"inventory/domain"
)

// ReconcileArgs asks for one reconciliation pass.
type ReconcileArgs struct{}

// Kind names the job in River's tables.
func (ReconcileArgs) Kind() string { return "reconcile" }

// ReconcileWorker checks the stock invariants and logs every mismatch. It never
// corrects anything: a mismatch means a bug or a manual write, and a person
// decides what is right.
type ReconcileWorker struct {
	river.WorkerDefaults[ReconcileArgs]
	Reconciler domain.Reconciler
	Logger     *slog.Logger
	// OnReconcile, if set, is told how many issues each pass found (metrics).
	OnReconcile func(issues int)
}

// Work runs one pass.
func (w *ReconcileWorker) Work(ctx context.Context, _ *river.Job[ReconcileArgs]) error {
	issues, err := w.Reconciler.Reconciliation(ctx)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	for _, i := range issues {
		w.Logger.ErrorContext(ctx, "reconciliation mismatch", "kind", i.Kind, "sku", i.SKU, "location", i.Location, "detail", i.Detail)
	}
	w.Logger.InfoContext(ctx, "reconciliation pass", "issues", len(issues))
	if w.OnReconcile != nil {
		w.OnReconcile(len(issues))
	}
	return nil
}
