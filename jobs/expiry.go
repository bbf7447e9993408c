package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"

	"inventory/domain"
)

// Expirer expires one hold when due, and every hold due, in sets.
// store.Store is one.
type Expirer interface {
	ReservationExpire(ctx context.Context, id string) (notBefore *time.Time, expired bool, err error)
	ReservationExpireDue(ctx context.Context, limit int) (int, error)
	// WaitlistExpire ends one waitlist entry at its deadline (EXPIRED)
	// if it is still waiting.
	WaitlistExpire(ctx context.Context, id string) (notBefore *time.Time, expired bool, err error)
}

// ExpiryWorker works the per-reservation expiry job inserted by reserve. The
// job may run early (the hold was extended): it then snoozes to the new
// deadline. Running it after the hold ended is harmless.
//
// When many holds fall due together (a flash sale's abandoned carts), one job
// per hold would end them one transaction at a time. So every job, once its
// own hold is expired by it, also ends every other hold already due, SetSize
// per transaction, until none is left: the first jobs of a storm end all of
// it, and the remaining jobs find their hold ended and finish at once,
// without a set transaction of their own. The ledger
// says which path ended each hold: actor system:expiry-job for a hold's own
// job, system:expiry-set for a set, system:sweeper for the backstop.
//
// At most SetLoops jobs of an instance run sets at a time; a job that finds
// them all taken ends only its own hold, and the running loops take the
// rest. Concurrent sets lock overlapping balance rows in the same order, so
// past a couple they mostly wait on each other and share the same cores:
// on two cores, the bench's storm of 50,000 holds was all ended 3.3 s after
// its last deadline with two loops, 4.7-5.8 s with all ten workers in sets.
type ExpiryWorker struct {
	river.WorkerDefaults[ReservationExpiryArgs]
	Expirer Expirer
	// SetSize is how many due holds one transaction ends (default 1000).
	SetSize int
	// SetLoops is how many jobs may end due holds in sets at once
	// (default 2).
	SetLoops int

	inSets atomic.Int32 // jobs of this worker now running sets
}

// Work expires the hold or snoozes until its deadline, then ends whatever
// else is due.
func (w *ExpiryWorker) Work(ctx context.Context, job *river.Job[ReservationExpiryArgs]) error {
	linkReserve(ctx, job.Metadata)
	notBefore, expired, err := w.Expirer.ReservationExpire(systemActor(ctx, "expiry-job"), job.Args.ReservationID)
	if err != nil {
		return fmt.Errorf("expire %s: %w", job.Args.ReservationID, err)
	}
	if notBefore != nil {
		return river.JobSnooze(max(time.Until(*notBefore), 0) + 10*time.Millisecond)
	}
	if !expired {
		// The hold had already ended (confirmed, released, or expired by
		// a set): whoever ended it by a set is ending the rest, so this job
		// adds no transaction of its own to a storm.
		return nil
	}
	loops := w.SetLoops
	if loops <= 0 {
		loops = 2
	}
	if w.inSets.Add(1) > int32(loops) {
		w.inSets.Add(-1)
		return nil
	}
	defer w.inSets.Add(-1)
	size := w.SetSize
	if size <= 0 {
		size = 1000
	}
	setCtx := systemActor(ctx, "expiry-set")
	for {
		n, err := w.Expirer.ReservationExpireDue(setCtx, size)
		if err != nil {
			return fmt.Errorf("expire due holds: %w", err)
		}
		if n < size {
			return nil
		}
	}
}

// WaitlistExpiryWorker works the per-entry expiry job inserted by a join:
// the entry ends EXPIRED at its deadline if it is still waiting. Running
// early (clock skew between instances) snoozes to the deadline; running
// after the entry ended is harmless.
type WaitlistExpiryWorker struct {
	river.WorkerDefaults[WaitlistExpiryArgs]
	Expirer Expirer
}

// Work expires the entry or snoozes until its deadline.
func (w *WaitlistExpiryWorker) Work(ctx context.Context, job *river.Job[WaitlistExpiryArgs]) error {
	notBefore, _, err := w.Expirer.WaitlistExpire(systemActor(ctx, "waitlist-expiry-job"), job.Args.EntryID)
	if err != nil {
		return fmt.Errorf("expire waitlist entry %s: %w", job.Args.EntryID, err)
	}
	if notBefore != nil {
		return river.JobSnooze(max(time.Until(*notBefore), 0) + 10*time.Millisecond)
	}
	return nil
}

// SweepArgs asks for one sweeper pass.
type SweepArgs struct{}

// Kind names the job in River's tables.
func (SweepArgs) Kind() string { return "reservation_sweep" }

// Sweeper expires holds overdue by more than Grace, in batches of
// BatchSize, as a backstop behind the expiry jobs.
type Sweeper interface {
	ReservationSweepOverdue(ctx context.Context, grace time.Duration, limit int) (int, error)
	// WaitlistExpireDue marks waiting entries past their TTL EXPIRED, at
	// most limit per call. Offers and reads already treat them as expired
	// from their deadline on, so a pass's period is all they can be late.
	WaitlistExpireDue(ctx context.Context, limit int) (int, error)
	HousekeepingPrune(ctx context.Context, keep time.Duration) error
}

// SweepWorker is the periodic backstop: expiry jobs should leave it nothing
// to do, so every hold it releases is logged at WARN as a sign that something
// upstream (workers down, queue backed up) is broken.
type SweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	Sweeper   Sweeper
	Logger    *slog.Logger
	Grace     time.Duration
	BatchSize int
	// MaxBatches bounds one pass, so a huge backlog is worked off over
	// several passes rather than in one long job.
	MaxBatches int
	// OnSweep, if set, is told how many holds each pass released (metrics).
	OnSweep func(released int)
}

// Work runs one pass: batches until one comes back short, then the
// waitlist entries past their TTL, then prunes old health records.
func (w *SweepWorker) Work(ctx context.Context, _ *river.Job[SweepArgs]) error {
	ctx = systemActor(ctx, "sweeper")
	total := 0
	for range w.MaxBatches {
		n, err := w.Sweeper.ReservationSweepOverdue(ctx, w.Grace, w.BatchSize)
		if err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
		total += n
		if n < w.BatchSize {
			break
		}
	}
	if total > 0 {
		w.Logger.WarnContext(ctx, "sweeper released overdue holds: expiry jobs are late or lost", "released", total)
	}
	if w.OnSweep != nil {
		w.OnSweep(total)
	}
	for range w.MaxBatches {
		n, err := w.Sweeper.WaitlistExpireDue(ctx, w.BatchSize)
		if err != nil {
			return fmt.Errorf("expire waitlist entries: %w", err)
		}
		if n < w.BatchSize {
			break
		}
	}
	return w.Sweeper.HousekeepingPrune(ctx, 24*time.Hour)
}

// systemActor marks ledger rows written by background work.
func systemActor(ctx context.Context, name string) context.Context {
	return domain.WithActor(ctx, domain.Actor{Role: domain.RoleAdmin, Name: "system:" + name})
}
