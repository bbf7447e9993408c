package store_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inventory/domain"
)

// The expiry race: at the deadline, the buyer's confirm and the expiry job (and
// in some rounds the sweeper) go for the same hold. Exactly one of them ends it:
// either it is sold (on_hand down by one) or it expired (on_hand unchanged, the
// confirm told RESERVATION_EXPIRED). Never both, never neither.
func TestReservationExpiryRace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const (
		workers = 20 // each on its own SKU
		rounds  = 10 // one hold per round: 200 races in all
	)
	for w := range workers {
		b.Stock(t, fmt.Sprintf("EXP-%02d", w), "AMS", rounds)
	}
	var confirmedN, expiredN, sweptN, snoozedN atomic.Int64

	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			sku := fmt.Sprintf("EXP-%02d", w)
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			onHand := rounds
			for round := range rounds {
				fail := func(format string, args ...any) {
					t.Errorf("worker %d round %d: %s", w, round, fmt.Sprintf(format, args...))
				}
				res, _, err := b.create(fmt.Sprintf("exp-%d", w), fmt.Sprintf("r%d", round), 1, line(sku, "AMS", 1))
				if err != nil {
					fail("reserve: %v", err)
					return
				}
				// Sleep until just about due: a few milliseconds either side, more
				// often before (the calls take a few milliseconds to get there).
				time.Sleep(time.Until(res.ExpiresAt.Add(time.Duration(rng.IntN(10000)-7000) * time.Microsecond)))

				withSweeper := round%3 == 0
				var (
					confirmed          domain.Reservation
					confirmErr         error
					snoozes            int
					expireErr, sweepEr error
				)
				start := make(chan struct{})
				var race sync.WaitGroup
				race.Go(func() {
					<-start
					confirmed, confirmErr = b.Store.ReservationConfirm(b.Ctx, domain.Scope{},
						domain.ConfirmInput{ID: res.ID, OrderRef: fmt.Sprintf("ORD-%d-%d", w, round)})
				})
				race.Go(func() {
					<-start
					snoozes, expireErr = b.expireLikeWorker(b.Ctx, res.ID)
				})
				if withSweeper {
					race.Go(func() {
						<-start
						var n int
						n, sweepEr = b.Store.ReservationSweepOverdue(b.Ctx, 0, 100)
						sweptN.Add(int64(n))
					})
				}
				close(start)
				race.Wait()
				snoozedN.Add(int64(snoozes))

				if expireErr != nil || sweepEr != nil {
					fail("expire: %v, sweep: %v", expireErr, sweepEr)
					return
				}
				status, err := b.statusOf(res.ID)
				if err != nil {
					fail("status: %v", err)
					return
				}
				on, rsv, err := b.balanceOf(sku, "AMS")
				if err != nil {
					fail("balance: %v", err)
					return
				}
				switch status {
				case "confirmed":
					confirmedN.Add(1)
					if confirmErr != nil || confirmed.Status != domain.StatusConfirmed {
						fail("ended confirmed, but the confirm answered %s %v", confirmed.Status, confirmErr)
					}
					onHand--
				case "expired":
					expiredN.Add(1)
					if !isCode(confirmErr, domain.CodeReservationExpired) {
						fail("ended expired, but the confirm answered %s %v", confirmed.Status, confirmErr)
					}
				default:
					fail("status %q after the race (confirm: %v)", status, confirmErr)
					return
				}
				if on != onHand || rsv != 0 {
					fail("status %s: on_hand %d reserved %d, want %d and 0", status, on, rsv, onHand)
				}
				causes, err := b.ledgerCauses(res.ID)
				if err != nil {
					fail("ledger: %v", err)
					return
				}
				if causes["reserved"] != 1 || causes[status] != 1 || len(causes) != 2 {
					fail("status %s: ledger rows by cause %v, want one 'reserved' and one %q", status, causes, status)
				}
				orders, err := b.queryInt(`SELECT count(*) FROM orders WHERE reservation_id = $1`, res.ID)
				if err != nil || (orders == 1) != (status == "confirmed") {
					fail("status %s: %d orders (%v)", status, orders, err)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d races: %d confirmed, %d expired (%d of them by the sweeper racers, which also take other workers' holds); the expiry job snoozed %d times",
		workers*rounds, confirmedN.Load(), expiredN.Load(), sweptN.Load(), snoozedN.Load())
	if n := b.sqlInt(t, `SELECT count(*) FROM reservations WHERE status NOT IN ('confirmed', 'expired')`); n != 0 {
		t.Fatalf("%d reservations neither confirmed nor expired", n)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM stock_movements WHERE cause IN ('confirmed', 'expired')`); n != workers*rounds {
		t.Fatalf("%d ending ledger rows for %d holds", n, workers*rounds)
	}
	b.requireInvariants(t)
}

// The deadline and the transitions around it, one at a time.
func TestReservationDeadlines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "DL", "AMS", 100)
	scope := domain.Scope{}

	// Holds that will be due after one second, and one that will not.
	dueConfirm := b.reserve(t, "cart-dl", "due-confirm", "DL", ptr("AMS"), 1, 1)
	dueExtend := b.reserve(t, "cart-dl", "due-extend", "DL", ptr("AMS"), 1, 1)
	dueExpire := b.reserve(t, "cart-dl", "due-expire", "DL", ptr("AMS"), 1, 1)
	live := b.reserve(t, "cart-dl", "live", "DL", ptr("AMS"), 2, 900)

	// Expiring a hold that is not yet due changes nothing and says when to
	// come back.
	before := b.state(t)
	notBefore, _, err := b.Store.ReservationExpire(b.Ctx, live.ID)
	if err != nil || notBefore == nil || !notBefore.Equal(live.ExpiresAt) {
		t.Fatalf("expire before due: %v %v, want %s", notBefore, err, live.ExpiresAt)
	}
	b.requireUnchanged(t, before, "expiring a hold that is not due")
	if s, _ := b.statusOf(live.ID); s != "held" {
		t.Fatalf("not-due hold is %s after expire", s)
	}

	// Extending while held moves the deadline; later needs no new job, the
	// existing one snoozes.
	jobs := func(id string) int {
		return b.sqlInt(t, `SELECT count(*) FROM river_job WHERE kind = 'reservation_expiry' AND args->>'reservation_id' = $1`, id)
	}
	later, err := b.Store.ReservationExtend(b.Ctx, scope, domain.ExtendInput{ID: live.ID, TTLSeconds: 1800})
	if err != nil || later.Status != domain.StatusHeld || !later.ExpiresAt.After(live.ExpiresAt) {
		t.Fatalf("extend later: %s -> %s %v", live.ExpiresAt, later.ExpiresAt, err)
	}
	if d := time.Until(later.ExpiresAt); d < 1790*time.Second || d > 1800*time.Second {
		t.Fatalf("extend later: deadline in %s, want about 1800 s", d)
	}
	if n := jobs(live.ID); n != 1 {
		t.Fatalf("extend later: %d expiry jobs, want 1", n)
	}
	// Earlier than the old deadline: a second job at the new one.
	earlier, err := b.Store.ReservationExtend(b.Ctx, scope, domain.ExtendInput{ID: live.ID, TTLSeconds: 600})
	if err != nil || earlier.Status != domain.StatusHeld || !earlier.ExpiresAt.Before(later.ExpiresAt) {
		t.Fatalf("extend earlier: %s -> %s %v", later.ExpiresAt, earlier.ExpiresAt, err)
	}
	if n := jobs(live.ID); n != 2 {
		t.Fatalf("extend earlier: %d expiry jobs, want 2", n)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM river_job WHERE kind = 'reservation_expiry' AND args->>'reservation_id' = $1 AND scheduled_at = $2`,
		live.ID, earlier.ExpiresAt); n != 1 {
		t.Fatalf("extend earlier: %d jobs scheduled at the new deadline %s", n, earlier.ExpiresAt)
	}
	if stored := b.sqlInt(t, `SELECT count(*) FROM reservations WHERE id = $1 AND expires_at = $2`, live.ID, earlier.ExpiresAt); stored != 1 {
		t.Fatalf("extend earlier: stored deadline is not %s", earlier.ExpiresAt)
	}

	time.Sleep(time.Until(dueExpire.ExpiresAt) + 50*time.Millisecond)

	// Confirm after the deadline, before any expiry ran: refused, and the
	// hold stays held (and counted) until the expiry job ends it.
	before = b.state(t)
	_, err = b.Store.ReservationConfirm(b.Ctx, scope, domain.ConfirmInput{ID: dueConfirm.ID, OrderRef: "ORD-late"})
	requireCode(t, err, domain.CodeReservationExpired)
	b.requireUnchanged(t, before, "a late confirm")
	if s, _ := b.statusOf(dueConfirm.ID); s != "held" {
		t.Fatalf("late confirm left the hold %s, want held", s)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM orders`); n != 0 {
		t.Fatalf("late confirm wrote %d orders", n)
	}
	// Extending after the deadline is refused just the same.
	_, err = b.Store.ReservationExtend(b.Ctx, scope, domain.ExtendInput{ID: dueExtend.ID, TTLSeconds: 900})
	requireCode(t, err, domain.CodeReservationExpired)
	b.requireUnchanged(t, before, "a late extend")
	if s, _ := b.statusOf(dueExtend.ID); s != "held" {
		t.Fatalf("late extend left the hold %s, want held", s)
	}

	// The expiry job ends a due hold; releasing it afterwards answers it as
	// it is, EXPIRED, without error; confirming it is RESERVATION_EXPIRED.
	if notBefore, _, err := b.Store.ReservationExpire(b.Ctx, dueExpire.ID); err != nil || notBefore != nil {
		t.Fatalf("expire when due: %v %v", notBefore, err)
	}
	before = b.state(t)
	rel, err := b.Store.ReservationRelease(b.Ctx, scope, domain.ReleaseInput{ID: dueExpire.ID, Reason: domain.ReasonCustomerCancelled})
	if err != nil || rel.Status != domain.StatusExpired || rel.ReleaseReason != nil {
		t.Fatalf("release after expiry: %s %v %v", rel.Status, rel.ReleaseReason, err)
	}
	_, err = b.Store.ReservationConfirm(b.Ctx, scope, domain.ConfirmInput{ID: dueExpire.ID, OrderRef: "ORD-expired"})
	requireCode(t, err, domain.CodeReservationExpired)
	_, err = b.Store.ReservationExtend(b.Ctx, scope, domain.ExtendInput{ID: dueExpire.ID, TTLSeconds: 60})
	requireCode(t, err, domain.CodeReservationExpired)
	if notBefore, _, err := b.Store.ReservationExpire(b.Ctx, dueExpire.ID); err != nil || notBefore != nil {
		t.Fatalf("expire again: %v %v", notBefore, err)
	}
	b.requireUnchanged(t, before, "transitions of an expired hold")

	// Release after confirm is INVALID_TRANSITION, and changes nothing.
	sold, err := b.Store.ReservationConfirm(b.Ctx, scope, domain.ConfirmInput{ID: live.ID, OrderRef: "ORD-live"})
	if err != nil || sold.Status != domain.StatusConfirmed {
		t.Fatalf("confirm: %s %v", sold.Status, err)
	}
	before = b.state(t)
	_, err = b.Store.ReservationRelease(b.Ctx, scope, domain.ReleaseInput{ID: live.ID, Reason: domain.ReasonPaymentFailed})
	requireCode(t, err, domain.CodeInvalidTransition)
	if notBefore, _, err := b.Store.ReservationExpire(b.Ctx, live.ID); err != nil || notBefore != nil {
		t.Fatalf("expire a confirmed hold: %v %v", notBefore, err)
	}
	b.requireUnchanged(t, before, "release and expire after confirm")
	if s, _ := b.statusOf(live.ID); s != "confirmed" {
		t.Fatalf("confirmed hold is %s", s)
	}

	// The two late holds are still held, and counted, until the expiry runs.
	if on, rsv := b.Balance(t, "DL", "AMS"); on != 98 || rsv != 2 {
		t.Fatalf("on_hand %d reserved %d, want 98 and 2", on, rsv)
	}
	for _, id := range []string{dueConfirm.ID, dueExtend.ID} {
		if notBefore, _, err := b.Store.ReservationExpire(b.Ctx, id); err != nil || notBefore != nil {
			t.Fatalf("expire %s: %v %v", id, notBefore, err)
		}
		if s, _ := b.statusOf(id); s != "expired" {
			t.Fatalf("%s is %s after expire", id, s)
		}
	}
	if on, rsv := b.Balance(t, "DL", "AMS"); on != 98 || rsv != 0 {
		t.Fatalf("on_hand %d reserved %d, want 98 and 0", on, rsv)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM reservations WHERE (status = 'held') = (ended_at IS NOT NULL)`); n != 0 {
		t.Fatalf("%d reservations with ended_at inconsistent with their status", n)
	}
	b.requireInvariants(t)
}

// The sweeper expires overdue holds only, says how many, records its pass, and
// the health report reads it back.
func TestReservationSweepAndHealth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "SW", "AMS", 100)

	h, err := b.Store.InventoryHealthGet(b.Ctx)
	if err != nil || h.LastSweepReleased != nil || h.LastSweepAt != nil || h.HeldReservations != 0 {
		t.Fatalf("health before any sweep: %+v %v", h, err)
	}

	var overdue []domain.Reservation
	for i := range 3 {
		overdue = append(overdue, b.reserve(t, "cart-sw", fmt.Sprintf("overdue-%d", i), "SW", ptr("AMS"), 1, 1))
	}
	var live []domain.Reservation
	for i := range 4 {
		live = append(live, b.reserve(t, "cart-sw", fmt.Sprintf("live-%d", i), "SW", ptr("AMS"), 2, 900))
	}
	// An overdue one that was confirmed in time is not the sweeper's.
	sold := b.reserve(t, "cart-sw", "sold", "SW", ptr("AMS"), 5, 1)
	if _, err := b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: sold.ID, OrderRef: "ORD-sw"}); err != nil {
		t.Fatal(err)
	}

	// Nothing is overdue yet.
	n, err := b.Store.ReservationSweepOverdue(b.Ctx, 0, 100)
	if err != nil || n != 0 {
		t.Fatalf("early sweep: %d %v", n, err)
	}
	h, err = b.Store.InventoryHealthGet(b.Ctx)
	if err != nil || h.LastSweepReleased == nil || *h.LastSweepReleased != 0 || h.HeldReservations != 7 || h.OverdueHolds != 0 {
		t.Fatalf("health after early sweep: %+v %v", h, err)
	}

	time.Sleep(time.Until(overdue[len(overdue)-1].ExpiresAt) + 50*time.Millisecond)
	h, err = b.Store.InventoryHealthGet(b.Ctx)
	if err != nil || h.OverdueHolds != 3 || h.HeldReservations != 7 {
		t.Fatalf("health with overdue holds: %+v %v", h, err)
	}
	// A grace longer than they are overdue leaves them alone.
	n, err = b.Store.ReservationSweepOverdue(b.Ctx, time.Hour, 100)
	if err != nil || n != 0 {
		t.Fatalf("sweep with an hour's grace: %d %v", n, err)
	}
	// A small limit takes the oldest first.
	n, err = b.Store.ReservationSweepOverdue(b.Ctx, 0, 2)
	if err != nil || n != 2 {
		t.Fatalf("sweep limited to 2: %d %v", n, err)
	}
	for i, r := range overdue[:2] {
		if s, _ := b.statusOf(r.ID); s != "expired" {
			t.Fatalf("overdue hold %d is %s after a sweep of 2", i, s)
		}
	}
	runsBefore := b.sqlInt(t, `SELECT count(*) FROM sweeper_runs`)
	n, err = b.Store.ReservationSweepOverdue(b.Ctx, 0, 100)
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d %v, want 1", n, err)
	}
	if runs := b.sqlInt(t, `SELECT count(*) FROM sweeper_runs`); runs != runsBefore+1 {
		t.Fatalf("sweeper_runs went from %d to %d", runsBefore, runs)
	}
	if last := b.sqlInt(t, `SELECT released FROM sweeper_runs ORDER BY id DESC LIMIT 1`); last != n {
		t.Fatalf("last sweeper_runs row says %d released, the sweep returned %d", last, n)
	}
	for _, r := range overdue {
		if s, _ := b.statusOf(r.ID); s != "expired" {
			t.Fatalf("overdue hold is %s after the sweep", s)
		}
	}
	for _, r := range live {
		if s, _ := b.statusOf(r.ID); s != "held" {
			t.Fatalf("live hold is %s after the sweep", s)
		}
	}
	if s, _ := b.statusOf(sold.ID); s != "confirmed" {
		t.Fatalf("confirmed hold is %s after the sweep", s)
	}
	if on, rsv := b.Balance(t, "SW", "AMS"); on != 95 || rsv != 8 {
		t.Fatalf("on_hand %d reserved %d, want 95 and 8", on, rsv)
	}

	h, err = b.Store.InventoryHealthGet(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.LastSweepReleased == nil || *h.LastSweepReleased != n || h.LastSweepAt == nil || time.Since(*h.LastSweepAt) > time.Minute {
		t.Fatalf("health: last sweep released %s at %v, want %d just now", optInt(h.LastSweepReleased), h.LastSweepAt, n)
	}
	if h.OverdueHolds != 0 || h.HeldReservations != len(live) {
		t.Fatalf("health: %d held, %d overdue, want %d and 0", h.HeldReservations, h.OverdueHolds, len(live))
	}
	sum := 0
	for _, bucket := range h.HeldByAge {
		sum += bucket.Count
	}
	if sum != h.HeldReservations || len(h.HeldByAge) != 5 || h.HeldByAge[0].Count != len(live) {
		t.Fatalf("health: held by age %+v sums to %d, want %d held, all in the first bucket", h.HeldByAge, sum, h.HeldReservations)
	}
	b.requireInvariants(t)
}
