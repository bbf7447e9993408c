package jobs_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// A hold whose expiry job is lost is released by the periodic sweeper, which
// records the pass for the health report and warns.
func TestSweeperReleasesOverdueHoldsWithoutJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "HP", "AMS", 5)
	b.Stock(t, "KB", "AMS", 5)

	// No client runs yet: the jobs are inserted, and then lost.
	lost1 := b.reserve(t, "lost-1", "HP", "AMS", 2, 1)
	lost2 := b.reserve(t, "lost-2", "KB", "AMS", 1, 1)
	kept := b.reserve(t, "kept", "HP", "AMS", 1, 600)
	tag, err := b.Pool.Exec(b.Ctx, `DELETE FROM river_job WHERE kind = 'reservation_expiry' AND args->>'reservation_id' = ANY($1)`,
		[]string{lost1.ID, lost2.ID})
	if err != nil || tag.RowsAffected() != 2 {
		t.Fatalf("deleting the expiry jobs: %v %v", tag, err)
	}
	const grace = time.Second
	waitFor(t, time.Now().Add(10*time.Second), "both holds to be overdue by more than the grace", func() bool {
		var n int
		if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM reservations WHERE status = 'held'
			AND expires_at < clock_timestamp() - make_interval(secs => $1)`, grace.Seconds()+0.2).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 2
	})
	h, err := b.Store.InventoryHealthGet(b.Ctx)
	if err != nil || h.HeldReservations != 3 || h.OverdueHolds != 2 || h.LastSweepAt != nil || h.LastSweepReleased != nil {
		t.Fatalf("health before the sweeper ran: %+v %v", h, err)
	}

	// One pass only (RunOnStart; the next would be an hour later), so what
	// it recorded is still the last pass when the test reads it.
	cfg := b.config()
	cfg.SweepGrace = grace
	cfg.SweepInterval = time.Hour
	started := b.dbNow(t)
	b.startClient(t, cfg)

	waitFor(t, time.Now().Add(10*time.Second), "the sweeper to expire both holds", func() bool {
		return b.reservation(t, lost1.ID).status != "held" && b.reservation(t, lost2.ID).status != "held"
	})
	for _, id := range []string{lost1.ID, lost2.ID} {
		if r := b.reservation(t, id); r.status != "expired" {
			t.Fatalf("reservation %s: %+v, want expired", id, r)
		}
	}
	b.requireEndedBy(t, lost1.ID, "expired", "system:sweeper", 2)
	b.requireEndedBy(t, lost2.ID, "expired", "system:sweeper", 1)
	if r := b.reservation(t, kept.ID); r.status != "held" {
		t.Fatalf("a hold that is not overdue: %+v, want held", r)
	}
	if on, rsv := b.Balance(t, "HP", "AMS"); on != 5 || rsv != 1 {
		t.Fatalf("HP after the sweep: on_hand %d reserved %d, want 5 and 1", on, rsv)
	}
	if on, rsv := b.Balance(t, "KB", "AMS"); on != 5 || rsv != 0 {
		t.Fatalf("KB after the sweep: on_hand %d reserved %d, want 5 and 0", on, rsv)
	}

	rows, err := b.Pool.Query(b.Ctx, `SELECT released FROM sweeper_runs ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil || len(runs) != 1 || runs[0] != 2 {
		t.Fatalf("sweeper_runs released: %v %v, want one pass that released 2", runs, err)
	}
	h, err = b.Store.InventoryHealthGet(b.Ctx)
	if err != nil || h.LastSweepReleased == nil || *h.LastSweepReleased != 2 || h.LastSweepAt == nil ||
		h.LastSweepAt.Before(started) || h.LastSweepAt.After(b.dbNow(t)) || h.HeldReservations != 1 || h.OverdueHolds != 0 {
		t.Fatalf("health after the sweep: %+v (last sweep %v released %v) %v, want the pass since %v that released 2",
			h, h.LastSweepAt, optInt(h.LastSweepReleased), err, started)
	}
	// The WARN is logged after the pass committed.
	waitFor(t, time.Now().Add(5*time.Second), "the sweeper's warning", func() bool {
		return len(b.logs.lines("level=WARN", `msg="sweeper released overdue holds: expiry jobs are late or lost"`, "released=2")) == 1
	})
	waitFor(t, time.Now().Add(5*time.Second), "the sweep job to be completed", func() bool {
		var state string
		if err := b.Pool.QueryRow(b.Ctx, `SELECT state::text FROM river_job WHERE kind = 'reservation_sweep'`).Scan(&state); err != nil {
			t.Fatalf("the sweep job: %v", err)
		}
		return state == "completed"
	})
	b.requireNoJobErrors(t)
	b.RequireReconciled(t)
}

func optInt(p *int) any {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// TestSweeperExpiresWaitlistEntries: a sweeper pass marks waiting entries
// past their TTL EXPIRED and leaves the others waiting.
func TestSweeperExpiresWaitlistEntries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "WL", "AMS", 1)
	b.reserve(t, "buyer", "WL", "AMS", 1, 600)
	ams := "AMS"
	join := func(checkout string) string {
		e, _, err := b.Store.WaitlistJoin(b.Ctx, domain.JoinWaitlistInput{CheckoutID: checkout, RequestKey: "k", SKU: "WL",
			Location: &ams, Quantity: 1, TTLSeconds: 600})
		if err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	due, live := join("due"), join("live")
	if _, err := b.Pool.Exec(b.Ctx, `UPDATE waitlist_entries SET expires_at = now() - interval '1 second' WHERE id = $1`, due); err != nil {
		t.Fatal(err)
	}
	cfg := b.config()
	cfg.SweepInterval = time.Hour
	b.startClient(t, cfg)
	status := func(id string) string {
		var s string
		if err := b.Pool.QueryRow(b.Ctx, `SELECT status FROM waitlist_entries WHERE id = $1`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	waitFor(t, time.Now().Add(10*time.Second), "the sweeper to expire the due entry", func() bool { return status(due) == "expired" })
	if s := status(live); s != "waiting" {
		t.Fatalf("the entry still within its TTL is %s", s)
	}
}

// TestWaitlistEntryExpiresByItsJob: the join inserts the entry's expiry
// job; when the TTL ends the job marks it EXPIRED, without a sweeper pass.
func TestWaitlistEntryExpiresByItsJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "WJ", "AMS", 1)
	b.reserve(t, "buyer", "WJ", "AMS", 1, 600)
	ams := "AMS"
	e, _, err := b.Store.WaitlistJoin(b.Ctx, domain.JoinWaitlistInput{CheckoutID: "c", RequestKey: "k", SKU: "WJ", Location: &ams, Quantity: 1, TTLSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg := b.config()
	cfg.SweepInterval = time.Hour // its one pass runs at start, before the entry is due
	b.startClient(t, cfg)
	waitFor(t, time.Now().Add(10*time.Second), "the entry's job to complete", func() bool {
		var state string
		if err := b.Pool.QueryRow(b.Ctx, `SELECT state FROM river_job WHERE kind = 'waitlist_expiry' AND args->>'entry_id' = $1`, e.ID).Scan(&state); err != nil {
			t.Fatal(err)
		}
		return state == "completed"
	})
	var status string
	if err := b.Pool.QueryRow(b.Ctx, `SELECT status FROM waitlist_entries WHERE id = $1`, e.ID).Scan(&status); err != nil || status != "expired" {
		t.Fatalf("after its job: %q %v, want expired", status, err)
	}
}
