package jobs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"inventory/jobs"
)

const (
	mismatchMsg = `msg="reconciliation mismatch"`
	passMsg     = `msg="reconciliation pass"`
)

// breakBalance changes on_hand behind the ledger's back, as a manual write or
// a bug would.
func (b *testBundle) breakBalance(t *testing.T, sku, location string) {
	t.Helper()
	tag, err := b.Pool.Exec(b.Ctx, `
		UPDATE balances SET on_hand = on_hand + 1
		WHERE sku_id = (SELECT id FROM skus WHERE code = $1) AND location_id = (SELECT id FROM locations WHERE code = $2)`, sku, location)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("breaking %s@%s: %v %v", sku, location, tag, err)
	}
}

// The reconcile worker logs each mismatch at ERROR, naming the SKU, and a
// summary; on a clean database only the summary, with no issues. It corrects
// nothing.
func TestReconcileWorkerLogsMismatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "HP", "AMS", 5)
	b.Stock(t, "KB", "AMS", 3)
	b.reserve(t, "k1", "HP", "AMS", 2, 600)
	w := &jobs.ReconcileWorker{Reconciler: b.Store, Logger: b.logger}
	job := &river.Job[jobs.ReconcileArgs]{JobRow: &rivertype.JobRow{ID: 1, Kind: jobs.ReconcileArgs{}.Kind()}}

	if err := w.Work(b.Ctx, job); err != nil {
		t.Fatalf("reconcile on a clean database: %v", err)
	}
	if got := b.logs.lines(passMsg, "issues=0"); len(got) != 1 {
		t.Fatalf("clean database: want one %s issues=0 line, got log:\n%s", passMsg, b.logs.String())
	}
	if got := b.logs.lines("level=ERROR"); len(got) != 0 {
		t.Fatalf("clean database logged errors: %q", got)
	}

	b.breakBalance(t, "HP", "AMS")
	b.logs.Reset()
	if err := w.Work(b.Ctx, job); err != nil {
		t.Fatalf("reconcile with a mismatch: %v", err)
	}
	got := b.logs.lines("level=ERROR", mismatchMsg)
	want := `kind=on_hand_ledger_mismatch sku=HP location=AMS detail="on_hand is 6 but the ledger sums to 5"`
	if len(got) != 1 || !strings.Contains(got[0], want) {
		t.Fatalf("mismatch log lines %q, want one with %s", got, want)
	}
	if len(b.logs.lines(passMsg, "issues=1")) != 1 || len(b.logs.lines("sku=KB")) != 0 {
		t.Fatalf("log after breaking HP:\n%s", b.logs.String())
	}
	if on, rsv := b.Balance(t, "HP", "AMS"); on != 6 || rsv != 2 {
		t.Fatalf("reconcile changed the balance: on_hand %d reserved %d, want 6 and 2 as broken", on, rsv)
	}
}

// Through the real client: the periodic reconcile job runs on start and
// reports the broken balance.
func TestReconcilePeriodicJobReportsMismatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "SKU-BROKEN", "AMS", 4)
	b.Stock(t, "SKU-OK", "AMS", 4)
	b.breakBalance(t, "SKU-BROKEN", "AMS")

	b.startClient(t, b.config())
	waitFor(t, time.Now().Add(10*time.Second), "the reconcile job's summary", func() bool {
		return len(b.logs.lines(passMsg)) > 0
	})
	got := b.logs.lines("level=ERROR", mismatchMsg)
	want := `kind=on_hand_ledger_mismatch sku=SKU-BROKEN location=AMS detail="on_hand is 5 but the ledger sums to 4"`
	if len(got) != 1 || !strings.Contains(got[0], want) {
		t.Fatalf("mismatch log lines %q, want one with %s", got, want)
	}
	if len(b.logs.lines(passMsg, "issues=1")) != 1 || len(b.logs.lines("sku=SKU-OK")) != 0 {
		t.Fatalf("log:\n%s", b.logs.String())
	}
	waitFor(t, time.Now().Add(5*time.Second), "the reconcile job to be completed", func() bool {
		var state string
		if err := b.Pool.QueryRow(b.Ctx, `SELECT state::text FROM river_job WHERE kind = 'reconcile'`).Scan(&state); err != nil {
			t.Fatalf("the reconcile job: %v", err)
		}
		return state == "completed"
	})
	b.requireNoJobErrors(t)
}
