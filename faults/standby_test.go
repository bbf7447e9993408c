package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestStandbyStoppedReadsFallBack: on a primary of its own with a streaming
// standby made by pg_basebackup, one instance reads storefront availability
// from the standby (DATABASE_REPLICA_URL; the in-memory copy off, so every
// read is a database read) while 6 anonymous clients read and 4 clients
// reserve. The standby is stopped (pg_ctl stop -m fast) under that load:
// not one read fails, /readyz stays 200, the primary takes the reads; it
// is started again and the standby takes them back. The answers agree with
// the primary's balances once the load ends, and the holds are counted in
// SQL on the primary.
func TestStandbyStoppedReadsFallBack(t *testing.T) {
	t.Parallel()
	h, standby, inst := withStandby(t, map[string]string{"INVENTORY_RATE_LIMIT_ANONYMOUS_READS": "0"})
	h.createKeys()
	s := stock{
		locations: []string{"AMS"},
		quantity:  map[string]map[string]int{"S-HP": {"AMS": 5000}, "S-CABLE": {"AMS": 5000}},
	}
	h.loadCatalog(inst.url, s)
	ctx := t.Context()

	standbyReads := func() float64 {
		v, _ := h.gauge(inst, `inventory_replica_reads_total{served_by="standby"}`)
		return v
	}
	primaryReads := func() float64 {
		v, _ := h.gauge(inst, `inventory_replica_reads_total{served_by="primary"}`)
		return v
	}
	if took, ok := waitFor(15*time.Second, func() bool { v, _ := h.gauge(inst, "inventory_replica_fresh"); return v == 1 }); !ok {
		t.Fatalf("the standby was not fresh within %s", took)
	}

	// Readers: anonymous availability, as a storefront reads it.
	var reads, failed atomic.Int64
	var firstFailure atomic.Value
	readCtx, stopReads := context.WithCancel(ctx)
	var readers sync.WaitGroup
	for range 6 {
		readers.Go(func() {
			for readCtx.Err() == nil {
				r, err := h.post(readCtx, inst.url, "", `{ availability(skus: ["S-HP", "S-CABLE"]) { sku available } }`, nil)
				if readCtx.Err() != nil {
					return
				}
				reads.Add(1)
				if err != nil || r.Status != 200 || len(r.Errors) > 0 || len(r.Data["availability"]) == 0 {
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("%v %d %+v %s", err, r.Status, r.Errors, r.raw))
				}
			}
		})
	}
	defer readers.Wait()
	defer stopReads()
	l := newLedger()
	ld := h.startLoad(ctx, l, 4, "standby", s, 600, func() []string { return []string{inst.url} }, 10*time.Millisecond)
	defer ld.abort()

	if took, ok := waitFor(10*time.Second, func() bool { return standbyReads() > 100 }); !ok {
		t.Fatalf("the standby answered %v reads in %s, want over 100", standbyReads(), took)
	}
	standby.stop()
	stoppedAt := time.Now()
	readsAtStop, primaryAtStop := reads.Load(), primaryReads()
	h.report("injected: pg_ctl stop -m fast of the standby under load (%d reads so far, %v by the standby)", readsAtStop, standbyReads())
	notReady := 0
	for time.Since(stoppedAt) < 3*time.Second {
		if code := h.readyz(inst); code != 200 {
			notReady++
			t.Errorf("/readyz %d while the standby was down", code)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if up, _ := h.gauge(inst, "inventory_replica_up"); up != 0 {
		t.Errorf("inventory_replica_up %v with the standby stopped", up)
	}
	if lag, _ := h.gauge(inst, "inventory_replica_lag_seconds"); lag < 1 {
		t.Errorf("inventory_replica_lag_seconds %v after 3 s with the standby stopped, want it to grow", lag)
	}
	byPrimary := primaryReads() - primaryAtStop
	duringOutage := reads.Load() - readsAtStop
	if byPrimary < float64(duringOutage)*0.9 {
		t.Errorf("the primary answered %v of the %d reads while the standby was down", byPrimary, duringOutage)
	}

	if err := standby.start(); err != nil {
		t.Fatal(err)
	}
	backAt := standbyReads()
	if took, ok := waitFor(15*time.Second, func() bool { return standbyReads() > backAt+100 }); !ok {
		t.Errorf("the standby did not take reads back within %s of starting again", took)
	}
	ld.finish()
	stopReads()
	readers.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d availability reads failed; first: %v", n, reads.Load(), firstFailure.Load())
	}

	// Once the standby has replayed everything, what it answers is the
	// primary's balance.
	var want []map[string]any
	rows, err := h.db.Query(ctx, `SELECT s.code, b.on_hand - b.reserved FROM balances b JOIN skus s ON s.id = b.sku_id ORDER BY s.code DESC`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var sku string
		var n int
		if err := rows.Scan(&sku, &n); err != nil {
			t.Fatal(err)
		}
		want = append(want, map[string]any{"sku": sku, "available": float64(n)})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if _, ok := waitFor(10*time.Second, func() bool {
		r, err := h.post(ctx, inst.url, "", `{ availability(skus: ["S-HP", "S-CABLE"]) { sku available } }`, nil)
		if err != nil || json.Unmarshal(r.Data["availability"], &got) != nil {
			return false
		}
		return fmt.Sprint(got) == fmt.Sprint(want)
	}); !ok {
		t.Errorf("availability %v, the primary's balances %v", got, want)
	}
	c := h.checkStore(ctx, l)
	h.report("verified: %d reads, %d failed; while the standby was down (%.1fs) the primary answered %v of %d, /readyz 200 throughout; the standby took reads back; %s",
		reads.Load(), failed.Load(), time.Since(stoppedAt).Seconds(), byPrimary, duringOutage, c)
}

// TestAuthoritativeReadsNeverReadTheStandby: with the standby's replay
// paused (pg_wal_replay_pause) and INVENTORY_REPLICA_MAX_LAG so wide that
// it still counts as fresh, database availability reads show the stale
// standby — proof that reads do go there — while a reserve, and then sku,
// balances and checkoutReservations, all see the primary's state at once.
func TestAuthoritativeReadsNeverReadTheStandby(t *testing.T) {
	t.Parallel()
	h, standby, inst := withStandby(t, map[string]string{"INVENTORY_REPLICA_MAX_LAG": "1h"})
	h.createKeys()
	s := stock{locations: []string{"AMS"}, quantity: map[string]map[string]int{"A-HP": {"AMS": 10}}}
	h.loadCatalog(inst.url, s)
	ctx := t.Context()
	available := func() string {
		r, err := h.post(ctx, inst.url, "", `{ availability(skus: ["A-HP"]) { available } }`, nil)
		if err != nil || len(r.Errors) > 0 {
			t.Fatalf("availability: %v %+v", err, r.Errors)
		}
		return string(r.Data["availability"])
	}
	if _, ok := waitFor(15*time.Second, func() bool { return available() == `[{"available":10}]` }); !ok {
		t.Fatalf("availability %s, want 10 once the standby has the stock", available())
	}
	conn, err := pgx.Connect(ctx, standby.url("faults"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatal(err)
	}
	h.report("injected: the standby's replay paused (pg_wal_replay_pause), INVENTORY_REPLICA_MAX_LAG=1h so it is still read")

	r, err := h.post(ctx, inst.url, h.service, `mutation { reserve(input: {checkoutId: "cart-1", requestKey: "k1", lines: [{sku: "A-HP", quantity: 3}]}) { reservation { id status } userErrors { code } } }`, nil)
	if err != nil || len(r.Errors) > 0 || !strings.Contains(string(r.Data["reserve"]), `"status":"HELD"`) {
		t.Fatalf("reserve: %v %+v %s", err, r.Errors, r.Data["reserve"])
	}
	time.Sleep(500 * time.Millisecond) // the standby would have replayed it by now, had it not been paused
	if got := available(); got != `[{"available":10}]` {
		t.Fatalf("availability %s with the standby paused, want the stale 10: the standby is not being read", got)
	}
	for name, q := range map[string]string{
		"sku":                  `{ sku(code: "A-HP") { balances { reserved available } } }`,
		"balances":             `{ balances { balances { sku reserved available } } }`,
		"checkoutReservations": `{ checkoutReservations(checkoutId: "cart-1") { status lines { quantity } } }`,
	} {
		r, err := h.post(ctx, inst.url, h.admin, q, nil)
		if err != nil || len(r.Errors) > 0 {
			t.Fatalf("%s: %v %+v", name, err, r.Errors)
		}
		want := `"reserved":3`
		if name == "checkoutReservations" {
			want = `"status":"HELD"`
		}
		if !strings.Contains(string(r.raw), want) {
			t.Errorf("%s answered %s, want %s: not the primary's state after the reserve", name, r.raw, want)
		}
	}
	if _, err := conn.Exec(ctx, `SELECT pg_wal_replay_resume()`); err != nil {
		t.Fatal(err)
	}
	if _, ok := waitFor(10*time.Second, func() bool { return available() == `[{"available":7}]` }); !ok {
		t.Errorf("availability %s after the standby resumed, want 7", available())
	}
	h.report("verified: with the standby paused, availability read it (10, stale) while sku, balances and checkoutReservations read the primary (3 reserved, HELD)")
}

// withStandby is a primary of the test's own with a streaming standby and
// one instance reading storefront availability there, the in-memory copy
// off so that every availability read is a database read; env adds
// settings.
func withStandby(t *testing.T, env map[string]string) (*harness, *cluster, *instance) {
	t.Helper()
	pg := newCluster(t)
	dbURL := pg.createDatabase("faults")
	standby := pg.newStandby(t)
	h := newHarness(t, dbURL)
	settings := map[string]string{
		"DATABASE_REPLICA_URL":           standby.url("faults"),
		"INVENTORY_AVAILABILITY_MAX_LAG": "0",
	}
	maps.Copy(settings, env)
	return h, standby, h.start("A", settings)
}
