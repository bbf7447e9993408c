package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"inventory/pgtest"
)

// TestJobsStoppedEverywhere: both instances run with INVENTORY_RUN_JOBS=false,
// so no River worker runs anywhere. Holds with a 1s TTL pass their deadline
// and stay held: inventory_overdue_holds on /metrics shows every one of them
// on both instances, and a confirm is refused RESERVATION_EXPIRED. Then an
// instance with jobs on starts (with a short sweeper interval and grace, so
// the sweeper races the expiry jobs): every hold is released, EXPIRED exactly
// once, stock back, and the gauge returns to 0.
func TestJobsStoppedEverywhere(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pgtest.NewDatabase(t))
	off := map[string]string{"INVENTORY_RUN_JOBS": "false"}
	a := h.start("A (jobs off)", off)
	b := h.start("B (jobs off)", off)
	h.createKeys()
	s := stock{
		locations: []string{"AMS", "BER"},
		quantity:  map[string]map[string]int{"J-HP": {"AMS": 100, "BER": 20}, "J-CABLE": {"AMS": 100, "BER": 20}},
		codes:     map[string]int{"J-GIFT": 40},
	}
	h.loadCatalog(a.url, s)
	ctx := t.Context()

	const holds = 24
	l := newLedger()
	gen := newBasketGen(7, s, 1)
	var ids []string
	var last time.Time
	for i := range holds {
		inst := []*instance{a, b}[i%2]
		in := gen.next(fmt.Sprintf("jobs-%d", i), "k")
		o := h.untilAnswered(ctx, l, func() []string { return []string{inst.url} }, 0, h.service, in, time.Now().Add(10*time.Second))
		if o.kind != held {
			t.Fatalf("hold %d: %s %s %s", i, o.kind, o.code, o.detail)
		}
		ids = append(ids, o.id)
		last = time.Now()
	}
	// Every deadline has passed a second ago.
	time.Sleep(time.Until(last.Add(2 * time.Second)))
	var stillHeld, jobsWaiting int
	if err := h.db.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE status = 'held' AND expires_at < now()`).Scan(&stillHeld); err != nil {
		t.Fatal(err)
	}
	if err := h.db.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'reservation_expiry' AND state IN ('scheduled', 'available')`).Scan(&jobsWaiting); err != nil {
		t.Fatal(err)
	}
	if stillHeld != holds || jobsWaiting != holds {
		t.Fatalf("with no worker running: %d of %d holds overdue and held, %d expiry jobs waiting", stillHeld, holds, jobsWaiting)
	}
	var gauges []string
	for _, inst := range []*instance{a, b} {
		v, ok := h.gauge(inst, "inventory_overdue_holds")
		if !ok || v != holds {
			t.Errorf("%s: inventory_overdue_holds = %v (present %v), want %d", inst.name, v, ok, holds)
		}
		gauges = append(gauges, fmt.Sprintf("%s %v", strings.Fields(inst.name)[0], v))
	}
	// Past its deadline a hold cannot be sold, expiry job or not.
	r, err := h.post(ctx, a.url, h.service, `mutation($id: ID!) { confirmReservation(input: {id: $id, orderRef: "J-1"}) { reservation { status } userErrors { code } } }`,
		map[string]any{"id": ids[0]})
	if err != nil || !strings.Contains(string(r.Data["confirmReservation"]), `"RESERVATION_EXPIRED"`) {
		t.Errorf("confirm of an overdue hold: %v %s %+v", err, r.Data["confirmReservation"], r.Errors)
	}
	h.report("injected: River stopped on every instance (INVENTORY_RUN_JOBS=false); %d holds with ttl 1s overdue for 1s+, still held, %d expiry jobs waiting; inventory_overdue_holds: %s; confirm refused RESERVATION_EXPIRED",
		stillHeld, jobsWaiting, strings.Join(gauges, ", "))

	started := time.Now()
	c := h.start("C (jobs on)", map[string]string{"INVENTORY_RUN_JOBS": "true", "INVENTORY_SWEEP_INTERVAL": "1s", "INVENTORY_SWEEP_GRACE": "1s"})
	took, ok := waitFor(30*time.Second, func() bool {
		var n int
		if err := h.db.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE status = 'expired'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == holds
	})
	if !ok {
		t.Fatalf("not every hold expired within %s of an instance with jobs starting", took)
	}
	sinceStart := time.Since(started)
	// Every expiry job is then worked to completion, whoever ended its hold
	// (a job that finds its hold ended has nothing to do); once they have,
	// nothing is left that could end a hold a second time.
	var badJobs int
	jobsIn, ok := waitFor(20*time.Second, func() bool {
		if err := h.db.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'reservation_expiry' AND state <> 'completed'`).Scan(&badJobs); err != nil {
			t.Fatal(err)
		}
		return badJobs == 0
	})
	if !ok {
		var states string
		if err := h.db.QueryRow(ctx, `SELECT string_agg(state || ' ' || n, ', ') FROM (SELECT state, count(*) AS n FROM river_job WHERE kind = 'reservation_expiry' GROUP BY state) s`).Scan(&states); err != nil {
			t.Fatal(err)
		}
		t.Errorf("%d expiry jobs not completed %s after every hold expired: %s", badJobs, jobsIn, states)
	}
	var byActor []string
	rows, err := h.db.Query(ctx, `SELECT actor, count(DISTINCT reservation_id) FROM stock_movements WHERE cause = 'expired' GROUP BY actor ORDER BY actor`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var actor string
		var n int
		if err := rows.Scan(&actor, &n); err != nil {
			t.Fatal(err)
		}
		byActor = append(byActor, fmt.Sprintf("%s %d", actor, n))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var reserved, heldCodes int
	if err := h.db.QueryRow(ctx, `SELECT coalesce(sum(reserved), 0) FROM balances`).Scan(&reserved); err != nil {
		t.Fatal(err)
	}
	if err := h.db.QueryRow(ctx, `SELECT count(*) FROM codes WHERE status <> 'available'`).Scan(&heldCodes); err != nil {
		t.Fatal(err)
	}
	if reserved != 0 || heldCodes != 0 {
		t.Errorf("after expiry: %d units still reserved, %d codes not available", reserved, heldCodes)
	}
	gauges = gauges[:0]
	for _, inst := range []*instance{a, b, c} {
		v, ok := h.gauge(inst, "inventory_overdue_holds")
		if !ok || v != 0 {
			t.Errorf("%s: inventory_overdue_holds = %v (present %v) after expiry, want 0", inst.name, v, ok)
		}
		gauges = append(gauges, fmt.Sprintf("%s %v", strings.Fields(inst.name)[0], v))
	}
	h.report("recovered: an instance with jobs on released all %d holds %.1fs after it started (%.1fs after it served); ended by: %s; every expiry job completed %.1fs later; reserved back to %d, codes held %d; inventory_overdue_holds: %s",
		holds, sinceStart.Seconds(), took.Seconds(), strings.Join(byActor, ", "), jobsIn.Seconds(), reserved, heldCodes, strings.Join(gauges, ", "))
	chk := h.checkStore(ctx, l)
	if chk.expired != holds {
		t.Errorf("%d of %d holds EXPIRED", chk.expired, holds)
	}
	h.report("verified: %d holds, %d EXPIRED exactly once (one end ledger row per line, one EXPIRED event per balance), 0 duplicates, %d half-done, reconciliation empty",
		chk.found, chk.expired, chk.halfDone)
}
