package jobs_test

import (
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"inventory/jobs"
)

// waitExpired polls the reservation every 100 ms until it is no longer held,
// requires that it expired (not before its deadline) by deadline, and returns
// when the poll saw it and the row as stored.
func (b *testBundle) waitExpired(t *testing.T, id string, deadline time.Time) (time.Time, resRow) {
	t.Helper()
	var seen time.Time
	var r resRow
	waitFor(t, deadline, "reservation "+id+" to expire", func() bool {
		r = b.reservation(t, id)
		if r.status == "held" {
			return false
		}
		seen = time.Now()
		return true
	})
	if r.status != "expired" || r.endedAt == nil {
		t.Fatalf("reservation %s: status %q ended_at %v, want expired", id, r.status, r.endedAt)
	}
	if r.endedAt.Before(r.expiresAt) || seen.Before(r.expiresAt) {
		t.Fatalf("reservation %s expired early: ended_at %v, seen %v, expires_at %v", id, *r.endedAt, seen, r.expiresAt)
	}
	return seen, r
}

// waitJobCompleted waits until the expiry job with this id is completed: River
// records the outcome shortly after the work committed.
func (b *testBundle) waitJobCompleted(t *testing.T, reservationID string, jobID int64) expiryJob {
	t.Helper()
	var job expiryJob
	waitFor(t, time.Now().Add(5*time.Second), "expiry job to be completed", func() bool {
		for _, j := range b.expiryJobs(t, reservationID) {
			if j.id == jobID {
				job = j
				return j.state == "completed"
			}
		}
		t.Fatalf("expiry job %d of %s is gone", jobID, reservationID)
		return false
	})
	return job
}

// A hold expires by its River job, run by the real client, soon after its
// deadline: the stock is available again and the ledger says who released it.
func TestExpiryJobExpiresHoldAtDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "HP", "AMS", 5)
	b.startClient(t, b.config())

	start := time.Now()
	res := b.reserve(t, "k1", "HP", "AMS", 2, 2)
	if on, rsv := b.Balance(t, "HP", "AMS"); on != 5 || rsv != 2 {
		t.Fatalf("after reserve: on_hand %d reserved %d", on, rsv)
	}
	js := b.expiryJobs(t, res.ID)
	if len(js) != 1 || !js[0].scheduledAt.Equal(res.ExpiresAt) || (js[0].state != "scheduled" && js[0].state != "available") {
		t.Fatalf("expiry jobs after reserve: %+v, want one scheduled at %v", js, res.ExpiresAt)
	}

	seen, r := b.waitExpired(t, res.ID, start.Add(10*time.Second))
	t.Logf("expiry latency after expires_at: %v by the expiring transaction (ended_at), %v as seen by polling every 100 ms",
		r.endedAt.Sub(r.expiresAt), seen.Sub(r.expiresAt))

	if on, rsv := b.Balance(t, "HP", "AMS"); on != 5 || rsv != 0 {
		t.Fatalf("after expiry: on_hand %d reserved %d, want 5 and 0", on, rsv)
	}
	b.requireEndedBy(t, res.ID, "expired", "system:expiry-job", 2)
	b.waitJobCompleted(t, res.ID, js[0].id)
	b.requireNoJobErrors(t)
	b.RequireReconciled(t)
	h, err := b.Store.InventoryHealthGet(b.Ctx)
	if err != nil || h.HeldReservations != 0 || h.OverdueHolds != 0 {
		t.Fatalf("health after expiry: %+v %v", h, err)
	}
}

// Extending a hold leaves its job at the old deadline: the job runs early,
// finds the hold not yet due, and snoozes to the new deadline, where it
// expires the hold.
func TestExpiryJobSnoozesToExtendedDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "HP", "AMS", 5)

	res := b.reserve(t, "k1", "HP", "AMS", 1, 2)
	ext := b.extend(t, res.ID, 6)
	// The client starts now, before the old deadline. River's scheduler makes
	// jobs due within its 5 s look-ahead available on its first pass (within
	// about 1 s of start), so the job is certain to run at the old deadline,
	// early, rather than only once the new deadline has passed too.
	b.startClient(t, b.config())

	if d := ext.ExpiresAt.Sub(res.ExpiresAt); d < 3500*time.Millisecond || d > 4500*time.Millisecond {
		t.Fatalf("extend moved the deadline by %v (from %v to %v), want about 4s", d, res.ExpiresAt, ext.ExpiresAt)
	}
	js := b.expiryJobs(t, res.ID)
	if len(js) != 1 || !js[0].scheduledAt.Equal(res.ExpiresAt) {
		t.Fatalf("expiry jobs after a later deadline: %+v, want only the one at the old deadline %v", js, res.ExpiresAt)
	}

	// Held all along until the old deadline + 3 s, with its stock.
	checkAt := res.ExpiresAt.Add(3 * time.Second)
	for time.Now().Before(checkAt) {
		if r := b.reservation(t, res.ID); r.status != "held" || !r.expiresAt.Equal(ext.ExpiresAt) {
			t.Fatalf("%v after the old deadline: %+v, want held until %v", time.Since(res.ExpiresAt), r, ext.ExpiresAt)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if on, rsv := b.Balance(t, "HP", "AMS"); on != 5 || rsv != 1 {
		t.Fatalf("at the old deadline + 3s: on_hand %d reserved %d, want 5 and 1", on, rsv)
	}
	if rows := b.endRows(t, res.ID); len(rows) != 0 {
		t.Fatalf("at the old deadline + 3s the ledger already ended the hold: %+v", rows)
	}
	// River v0.51.2 records a snooze as metadata "snoozes" += 1 with the attempt
	// given back (attempt 0 again), and reschedules the job at the snooze's
	// end: state 'available' for a snooze shorter than the scheduler interval
	// (5 s), 'scheduled' for a longer one. The worker snoozes to 10 ms past the
	// deadline. The job ran at the old deadline, so it has snoozed by now; on a
	// loaded machine allow it until just before the new deadline.
	var j expiryJob
	waitFor(t, ext.ExpiresAt.Add(-200*time.Millisecond), "the expiry job to run early and snooze", func() bool {
		js = b.expiryJobs(t, res.ID)
		if len(js) != 1 {
			t.Fatalf("expiry jobs: %+v, want one", js)
		}
		j = js[0]
		return j.snoozes > 0
	})
	if j.attemptedAt == nil || j.attemptedAt.Before(res.ExpiresAt) || !j.attemptedAt.Before(ext.ExpiresAt) {
		t.Fatalf("snoozed expiry job %+v: want it run between the old deadline %v and the new %v", j, res.ExpiresAt, ext.ExpiresAt)
	}
	t.Logf("the job ran %v after the old deadline and snoozed", j.attemptedAt.Sub(res.ExpiresAt))
	if r := b.reservation(t, res.ID); r.status != "held" {
		t.Fatalf("after the snooze: %+v, want held", r)
	}
	if j.snoozes != 1 || j.attempt != 0 || (j.state != "available" && j.state != "scheduled") ||
		j.scheduledAt.Before(ext.ExpiresAt) || j.scheduledAt.After(ext.ExpiresAt.Add(time.Second)) || j.errors != 0 {
		t.Fatalf("expiry job at the old deadline + 3s: %+v, want snoozed once to just after %v", j, ext.ExpiresAt)
	}

	seen, r := b.waitExpired(t, res.ID, ext.ExpiresAt.Add(10*time.Second))
	t.Logf("expiry latency after the extended expires_at: %v by ended_at, %v as seen by polling",
		r.endedAt.Sub(r.expiresAt), seen.Sub(r.expiresAt))
	if !r.expiresAt.Equal(ext.ExpiresAt) {
		t.Fatalf("expires_at %v, want the extended %v", r.expiresAt, ext.ExpiresAt)
	}
	if on, rsv := b.Balance(t, "HP", "AMS"); on != 5 || rsv != 0 {
		t.Fatalf("after expiry: on_hand %d reserved %d, want 5 and 0", on, rsv)
	}
	b.requireEndedBy(t, res.ID, "expired", "system:expiry-job", 1)
	if j := b.waitJobCompleted(t, res.ID, j.id); j.snoozes != 1 || j.attempt != 1 {
		t.Fatalf("completed expiry job: %+v, want one snooze and one attempt", j)
	}
	b.requireNoJobErrors(t)
	b.RequireReconciled(t)
}

// Shortening a hold schedules a new job at the earlier deadline, which expires
// it; the old job, still scheduled at the old deadline, will find nothing to do.
func TestExpiryJobAtShortenedDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "HP", "AMS", 5)
	b.startClient(t, b.config())

	res := b.reserve(t, "k1", "HP", "AMS", 3, 60)
	ext := b.extend(t, res.ID, 2)
	if !ext.ExpiresAt.Before(res.ExpiresAt.Add(-50 * time.Second)) {
		t.Fatalf("extend to 2s moved the deadline from %v to %v", res.ExpiresAt, ext.ExpiresAt)
	}
	js := b.expiryJobs(t, res.ID)
	if len(js) != 2 || !js[0].scheduledAt.Equal(res.ExpiresAt) || !js[1].scheduledAt.Equal(ext.ExpiresAt) {
		t.Fatalf("expiry jobs after shortening: %+v, want one at %v and one at %v", js, res.ExpiresAt, ext.ExpiresAt)
	}

	seen, r := b.waitExpired(t, res.ID, ext.ExpiresAt.Add(10*time.Second))
	t.Logf("expiry latency after the shortened expires_at: %v by ended_at, %v as seen by polling",
		r.endedAt.Sub(r.expiresAt), seen.Sub(r.expiresAt))
	if on, rsv := b.Balance(t, "HP", "AMS"); on != 5 || rsv != 0 {
		t.Fatalf("after expiry: on_hand %d reserved %d, want 5 and 0", on, rsv)
	}
	b.requireEndedBy(t, res.ID, "expired", "system:expiry-job", 3)
	b.waitJobCompleted(t, res.ID, js[1].id)
	if old := b.expiryJobs(t, res.ID)[0]; old.state != "scheduled" || old.attempt != 0 {
		t.Fatalf("the job at the old deadline ran: %+v", old)
	}

	// When the old job runs, the hold has ended: it succeeds and changes nothing.
	w := &jobs.ExpiryWorker{Expirer: b.Store}
	if err := w.Work(b.Ctx, &river.Job[jobs.ReservationExpiryArgs]{JobRow: &rivertype.JobRow{ID: js[0].id, Kind: "reservation_expiry"},
		Args: jobs.ReservationExpiryArgs{ReservationID: res.ID}}); err != nil {
		t.Fatalf("the old expiry job after the hold ended: %v", err)
	}
	b.requireEndedBy(t, res.ID, "expired", "system:expiry-job", 3)
	if on, rsv := b.Balance(t, "HP", "AMS"); on != 5 || rsv != 0 {
		t.Fatalf("after the old job: on_hand %d reserved %d, want 5 and 0", on, rsv)
	}
	b.requireNoJobErrors(t)
	b.RequireReconciled(t)
}
