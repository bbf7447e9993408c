package jobs_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"inventory/domain"
	"inventory/jobs"
	"inventory/testkit"
)

// logBuffer is the workers' and River's log, as the tests read it.
type logBuffer struct{ testkit.LogBuffer }

// lines returns the logged lines that contain every one of parts.
func (l *logBuffer) lines(parts ...string) []string {
	var out []string
	for line := range strings.SplitSeq(l.String(), "\n") {
		ok := line != ""
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// testBundle is what the job tests need: a store on a database of its own, a
// context acting as an admin, and a logger whose output the test can read.
type testBundle struct {
	testkit.Kit
	logs   *logBuffer
	logger *slog.Logger
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	kit := testkit.New(t, "test")
	logs := &logBuffer{}
	// Registered before any client is started, so it runs after the client
	// stopped: the whole log is there to read when a test failed.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log output:\n%s", logs.String())
		}
	})
	return &testBundle{
		Kit:    kit,
		logs:   logs,
		logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
}

// config is the test configuration: fast periodic work. The sweeper's grace is
// the production default (15 s), so in tests about expiry jobs the sweeper
// never takes a hold from its job; sweeper tests shorten it.
func (b *testBundle) config() jobs.Config {
	return jobs.Config{
		Reconciler:        b.Store,
		Expirer:           b.Store,
		Sweeper:           b.Store,
		EventsPruner:      b.Store,
		EventsRetention:   7 * 24 * time.Hour,
		Logger:            b.logger,
		ReconcileInterval: time.Hour,
		SweepInterval:     time.Second,
		SweepGrace:        15 * time.Second,
		MaxWorkers:        10,
	}
}

// startClient builds the real River client with jobs.NewClient, starts it
// (with a WebhookDispatcher ticking every 100 ms when cfg.Webhooks is set),
// and stops both when the test ends (before the pool closes).
func (b *testBundle) startClient(t *testing.T, cfg jobs.Config) *river.Client[pgx.Tx] {
	t.Helper()
	client, err := jobs.NewClient(b.Pool, cfg)
	if err != nil {
		t.Fatalf("jobs.NewClient: %v", err)
	}
	if err := client.Start(context.Background()); err != nil {
		t.Fatalf("client.Start: %v", err)
	}
	dispatchCtx, stopDispatch := context.WithCancel(context.Background())
	dispatched := make(chan struct{})
	if cfg.Webhooks != nil {
		d := &jobs.WebhookDispatcher{Store: cfg.Webhooks, Client: client, Interval: 100 * time.Millisecond, Logger: cfg.Logger}
		go func() { defer close(dispatched); d.Run(dispatchCtx) }()
	} else {
		close(dispatched)
	}
	t.Cleanup(func() {
		stopDispatch()
		<-dispatched
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := client.Stop(ctx); err != nil {
			t.Errorf("client.Stop: %v", err)
		}
	})
	return client
}

// reserve holds q units of sku at location for ttl seconds.
func (b *testBundle) reserve(t *testing.T, key, sku, location string, q, ttl int) domain.Reservation {
	t.Helper()
	res, replayed, err := b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: "cart-" + key, RequestKey: key, TTLSeconds: ttl,
		Lines: []domain.ReserveLine{{SKU: sku, Location: &location, Quantity: q}}})
	if err != nil || replayed || res.Status != domain.StatusHeld {
		t.Fatalf("reserve %s: %+v replayed=%v err=%v", key, res, replayed, err)
	}
	return res
}

func (b *testBundle) extend(t *testing.T, id string, ttl int) domain.Reservation {
	t.Helper()
	res, err := b.Store.ReservationExtend(b.Ctx, domain.Scope{}, domain.ExtendInput{ID: id, TTLSeconds: ttl})
	if err != nil || res.Status != domain.StatusHeld {
		t.Fatalf("extend %s to %ds: %+v %v", id, ttl, res, err)
	}
	return res
}

// resRow is a reservation as stored.
type resRow struct {
	status    string
	expiresAt time.Time
	endedAt   *time.Time
}

func (b *testBundle) reservation(t *testing.T, id string) resRow {
	t.Helper()
	var r resRow
	if err := b.Pool.QueryRow(b.Ctx, `SELECT status, expires_at, ended_at FROM reservations WHERE id = $1`, id).
		Scan(&r.status, &r.expiresAt, &r.endedAt); err != nil {
		t.Fatalf("reading reservation %s: %v", id, err)
	}
	return r
}

// ledgerRow is one stock_movements row written for a reservation.
type ledgerRow struct {
	cause                      string
	actor                      string
	onHandDelta, reservedDelta int
}

// endRows returns the ledger rows that ended the reservation's hold: every row
// for it other than the 'reserved' one written when it was made.
func (b *testBundle) endRows(t *testing.T, id string) []ledgerRow {
	t.Helper()
	rows, err := b.Pool.Query(b.Ctx, `
		SELECT cause, actor, on_hand_delta, reserved_delta FROM stock_movements
		WHERE reservation_id = $1 AND cause <> 'reserved' ORDER BY id`, id)
	if err != nil {
		t.Fatalf("reading ledger of %s: %v", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ledgerRow, error) {
		var l ledgerRow
		return l, r.Scan(&l.cause, &l.actor, &l.onHandDelta, &l.reservedDelta)
	})
	if err != nil {
		t.Fatalf("reading ledger of %s: %v", id, err)
	}
	return out
}

// requireEndedBy fails unless exactly one ledger row ended the hold of q
// units, with the given cause and actor.
func (b *testBundle) requireEndedBy(t *testing.T, id, cause, actor string, q int) {
	t.Helper()
	wantOnHand := 0
	if cause == "confirmed" {
		wantOnHand = -q
	}
	want := ledgerRow{cause: cause, actor: actor, onHandDelta: wantOnHand, reservedDelta: -q}
	if got := b.endRows(t, id); len(got) != 1 || got[0] != want {
		t.Fatalf("ledger rows ending %s: %+v, want exactly [%+v]", id, got, want)
	}
}

// expiryJob is a reservation_expiry row in river_job.
type expiryJob struct {
	id          int64
	state       string
	attempt     int
	scheduledAt time.Time
	attemptedAt *time.Time // when it last started running
	snoozes     int
	errors      int
}

// expiryJobs returns the reservation's expiry jobs in insertion order.
func (b *testBundle) expiryJobs(t *testing.T, reservationID string) []expiryJob {
	t.Helper()
	rows, err := b.Pool.Query(b.Ctx, `
		SELECT id, state::text, attempt, scheduled_at, attempted_at, coalesce((metadata->>'snoozes')::int, 0), coalesce(cardinality(errors), 0)
		FROM river_job WHERE kind = 'reservation_expiry' AND args->>'reservation_id' = $1 ORDER BY id`, reservationID)
	if err != nil {
		t.Fatalf("reading expiry jobs of %s: %v", reservationID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (expiryJob, error) {
		var j expiryJob
		return j, r.Scan(&j.id, &j.state, &j.attempt, &j.scheduledAt, &j.attemptedAt, &j.snoozes, &j.errors)
	})
	if err != nil {
		t.Fatalf("reading expiry jobs of %s: %v", reservationID, err)
	}
	return out
}

// requireNoJobErrors fails if any River job recorded an error: a worker that
// failed (and would be retried) is a bug even if a retry later succeeds.
func (b *testBundle) requireNoJobErrors(t *testing.T) {
	t.Helper()
	rows, err := b.Pool.Query(b.Ctx, `SELECT id, kind, state::text, errors::text FROM river_job WHERE coalesce(cardinality(errors), 0) > 0`)
	if err != nil {
		t.Fatal(err)
	}
	type bad struct {
		ID                  int64
		Kind, State, Errors string
	}
	failed, err := pgx.CollectRows(rows, pgx.RowToStructByPos[bad])
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) > 0 {
		t.Fatalf("River jobs recorded errors: %+v", failed)
	}
}

// waitFor calls cond every 100 ms until it returns true, and fails the test
// (saying what) if that has not happened by deadline.
func waitFor(t *testing.T, deadline time.Time, what string, cond func() bool) {
	t.Helper()
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dbNow is the database's clock, which decides every deadline.
func (b *testBundle) dbNow(t *testing.T) time.Time {
	t.Helper()
	var now time.Time
	if err := b.Pool.QueryRow(b.Ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// waitWebhookCursors waits (up to 20 s) until every webhook endpoint's
// cursor is at head: each has been sent, or has passed over, every event.
func (b *testBundle) waitWebhookCursors(t *testing.T, head int64) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		list, err := b.Store.WebhookList(b.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		done := true
		for _, w := range list {
			done = done && w.CursorSeq == head
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cursors %+v after 20s, head %d", list, head)
		}
	}
}
