package jobs_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"inventory/domain"
)

// Confirms race the real expiry as deadlines pass: for every hold exactly one
// side wins. A confirm either sells the stock before the deadline or is told
// RESERVATION_EXPIRED, never any other error, and the hold then expires. Run
// once with only the expiry jobs expiring holds (each its own, or a set of
// due ones), and once with the sweeper
// (grace 1 s) racing them as well.
func TestConfirmRacesRealExpiry(t *testing.T) {
	t.Parallel()
	t.Run("ExpiryJob", func(t *testing.T) {
		t.Parallel()
		raceConfirmsWithExpiry(t, 15*time.Second, "system:expiry-job", "system:expiry-set")
	})
	t.Run("ExpiryJobAndSweeper", func(t *testing.T) {
		t.Parallel()
		raceConfirmsWithExpiry(t, time.Second, "system:expiry-job", "system:expiry-set", "system:sweeper")
	})
}

// raceConfirmsWithExpiry runs the race with the sweeper's grace given; an
// expired hold's ledger row must name one of expirers.
func raceConfirmsWithExpiry(t *testing.T, sweepGrace time.Duration, expirers ...string) {
	b := setup(t)
	const (
		n      = 20
		q      = 3
		onHand = 10
	)
	cfg := b.config()
	cfg.SweepGrace = sweepGrace
	b.startClient(t, cfg)
	sku := func(i int) string { return fmt.Sprintf("SKU-%02d", i) }
	for i := range n {
		b.Stock(t, sku(i), "AMS", onHand)
	}

	holds := make([]domain.Reservation, n)
	for i := range n {
		holds[i] = b.reserve(t, fmt.Sprintf("k%02d", i), sku(i), "AMS", q, 1)
	}
	// Each confirm fires at its hold's deadline plus an offset from +550 ms
	// (the first hold made) down to -970 ms (the last, whose deadline is the
	// freshest), 80 ms apart: the early ones should win even on a loaded
	// machine, the late ones lose, and those near zero race the expiry job
	// and the sweeper for the row.
	offset := func(i int) time.Duration { return 550*time.Millisecond - time.Duration(i)*80*time.Millisecond }
	results := make([]domain.Reservation, n)
	errs := make([]error, n)
	calledAt := make([]time.Time, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			time.Sleep(time.Until(holds[i].ExpiresAt.Add(offset(i))))
			calledAt[i] = time.Now()
			results[i], errs[i] = b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{
				ID: holds[i].ID, OrderRef: fmt.Sprintf("ORD-%02d", i)})
		})
	}
	wg.Wait()

	// Every hold that lost must now expire (by its job or the sweeper).
	lastDeadline := holds[n-1].ExpiresAt
	waitFor(t, lastDeadline.Add(10*time.Second), "every hold to end", func() bool {
		var held int
		if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM reservations WHERE status = 'held'`).Scan(&held); err != nil {
			t.Fatal(err)
		}
		return held == 0
	})

	confirmed, byJob, bySweeper := 0, 0, 0
	minLatency, maxLatency := time.Hour, time.Duration(0)
	for i, h := range holds {
		r := b.reservation(t, h.ID)
		on, rsv := b.Balance(t, sku(i), "AMS")
		rows := b.endRows(t, h.ID)
		where := fmt.Sprintf("hold %d (confirm called %v after its deadline)", i, calledAt[i].Sub(h.ExpiresAt))
		if errs[i] == nil {
			confirmed++
			if results[i].Status != domain.StatusConfirmed || results[i].Order == nil || results[i].Order.Ref != fmt.Sprintf("ORD-%02d", i) {
				t.Fatalf("%s: confirm returned %+v", where, results[i])
			}
			if r.status != "confirmed" || r.endedAt == nil || !r.endedAt.Before(r.expiresAt) {
				t.Fatalf("%s: confirmed, but stored %+v", where, r)
			}
			if on != onHand-q || rsv != 0 {
				t.Fatalf("%s: confirmed, but on_hand %d reserved %d, want %d and 0", where, on, rsv, onHand-q)
			}
			if len(rows) != 1 || rows[0] != (ledgerRow{cause: "confirmed", actor: "test", onHandDelta: -q, reservedDelta: -q}) {
				t.Fatalf("%s: confirmed, but the ledger ended it with %+v", where, rows)
			}
			continue
		}
		if e, ok := domain.AsError(errs[i]); !ok || e.Code != domain.CodeReservationExpired {
			t.Fatalf("%s: confirm failed with %v, want RESERVATION_EXPIRED", where, errs[i])
		}
		if r.status != "expired" || r.endedAt == nil || r.endedAt.Before(r.expiresAt) {
			t.Fatalf("%s: RESERVATION_EXPIRED, but stored %+v", where, r)
		}
		if on != onHand || rsv != 0 {
			t.Fatalf("%s: expired, but on_hand %d reserved %d, want %d and 0", where, on, rsv, onHand)
		}
		if len(rows) != 1 || rows[0].cause != "expired" || rows[0].onHandDelta != 0 || rows[0].reservedDelta != -q ||
			!slices.Contains(expirers, rows[0].actor) {
			t.Fatalf("%s: expired, but the ledger ended it with %+v, want one 'expired' row by one of %q", where, rows, expirers)
		}
		if rows[0].actor == "system:sweeper" {
			bySweeper++
		} else {
			byJob++
		}
		latency := r.endedAt.Sub(r.expiresAt)
		minLatency, maxLatency = min(minLatency, latency), max(maxLatency, latency)
		var orders int
		if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM orders WHERE reservation_id = $1`, h.ID).Scan(&orders); err != nil || orders != 0 {
			t.Fatalf("%s: expired, but %d orders (%v)", where, orders, err)
		}
	}
	t.Logf("sweeper grace %v: %d confirmed, %d expired by their job, %d by the sweeper; expiry %v to %v after the deadline (ended_at)",
		sweepGrace, confirmed, byJob, bySweeper, minLatency, maxLatency)
	if confirmed == 0 || confirmed == n {
		t.Fatalf("%d of %d confirmed: the confirms did not straddle the deadlines", confirmed, n)
	}

	// Totals in SQL: every unit is either sold or back on the shelf, and
	// each balance equals its ledger's sums.
	var sumOnHand, sumReserved, ledgerOnHand, ledgerReserved int
	if err := b.Pool.QueryRow(b.Ctx, `
		SELECT (SELECT sum(on_hand) FROM balances), (SELECT sum(reserved) FROM balances),
		       (SELECT sum(on_hand_delta) FROM stock_movements), (SELECT sum(reserved_delta) FROM stock_movements)`).
		Scan(&sumOnHand, &sumReserved, &ledgerOnHand, &ledgerReserved); err != nil {
		t.Fatal(err)
	}
	if sumOnHand != n*onHand-confirmed*q || sumReserved != 0 || ledgerOnHand != sumOnHand || ledgerReserved != 0 {
		t.Fatalf("totals: on_hand %d (ledger %d) reserved %d (ledger %d), want on_hand %d and reserved 0",
			sumOnHand, ledgerOnHand, sumReserved, ledgerReserved, n*onHand-confirmed*q)
	}
	b.RequireReconciled(t)

	// Every expiry job finishes without an error, including those whose hold
	// was confirmed or swept first.
	waitFor(t, time.Now().Add(10*time.Second), "every expiry job to be completed", func() bool {
		var open int
		if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM river_job WHERE kind = 'reservation_expiry' AND state <> 'completed'`).Scan(&open); err != nil {
			t.Fatal(err)
		}
		return open == 0
	})
	b.requireNoJobErrors(t)
}
