package faults

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPostgresRestartUnderLoad: on a PostgreSQL cluster of its own, while 8
// clients reserve and two admin clients follow stockChanged over WebSocket,
// the cluster is shut down (pg_ctl stop -m fast), kept down for a few
// seconds — long enough for holds made just before to come due — and
// started again. /readyz answers 503 while it is down and 200 again by
// itself; clients retry with the same key until answered and nothing
// acknowledged is lost; the holds that came due during the outage are
// expired afterwards, each once; both subscribers (one also dropped during
// the outage and reconnecting while the database is away) resume and
// receive every seq exactly once, in order.
func TestPostgresRestartUnderLoad(t *testing.T) {
	t.Parallel()
	pg := newCluster(t)
	h := newHarness(t, pg.createDatabase("faults"))
	inst := h.start("A", nil) // migrates the new database
	h.createKeys()
	s := stock{
		locations: []string{"AMS", "BER"},
		quantity: map[string]map[string]int{
			"R-HP": {"AMS": 1000, "BER": 200}, "R-CABLE": {"AMS": 1000, "BER": 200},
			"R-MOUSE": {"AMS": 1000, "BER": 200},
		},
		codes: map[string]int{"R-GIFT": 300},
	}
	h.loadCatalog(inst.url, s)
	ctx := t.Context()

	subCtx, stopSubs := context.WithCancel(ctx)
	var subs sync.WaitGroup
	steady, dropped := newSubscriber("steady", inst.url, h.admin), newSubscriber("dropped", inst.url, h.admin)
	for _, sub := range []*subscriber{steady, dropped} {
		subs.Go(func() { sub.run(subCtx) })
	}
	defer subs.Wait()
	defer stopSubs()

	l := newLedger()
	urls := func() []string { return []string{inst.url} }
	ld := h.startLoad(ctx, l, 8, "restart", s, 600, urls, 20*time.Millisecond)
	defer ld.abort()
	time.Sleep(time.Second)

	// Holds that will come due while the database is down, made together
	// just before it goes down.
	const dueN, dueTTL = 10, 3
	gen := newBasketGen(42, s, dueTTL)
	due := make([]string, dueN)
	var wg sync.WaitGroup
	for i := range dueN {
		in := gen.next(fmt.Sprintf("due-%d", i), "k")
		wg.Go(func() {
			if o := h.untilAnswered(ctx, l, urls, 0, h.service, in, time.Now().Add(10*time.Second)); o.kind == held {
				due[i] = o.id
			}
		})
	}
	wg.Wait()
	dueBy := time.Now().Add(dueTTL * time.Second)
	var stillHeld int
	if err := h.db.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE id::text = ANY($1) AND status = 'held'`, due).Scan(&stillHeld); err != nil {
		t.Fatal(err)
	}
	if stillHeld != dueN {
		t.Fatalf("only %d of %d short holds are held before the outage", stillHeld, dueN)
	}

	heldBefore, _ := l.counts()
	downAt := time.Now()
	pg.stop()
	h.report("injected: pg_ctl stop -m fast of the test's own cluster under load (%d holds acknowledged so far, %d of them with ttl %ds, due during the outage)", heldBefore, dueN, dueTTL)
	time.Sleep(600 * time.Millisecond) // past the key cache's 500ms: reconnecting needs the database
	dropped.drop()
	took503, ok := waitFor(10*time.Second, func() bool { return h.readyz(inst) == 503 })
	if !ok {
		t.Errorf("/readyz did not answer 503 within %s of the database going down", took503)
	}
	notReady := 0
	for time.Now().Before(dueBy.Add(time.Second)) || time.Since(downAt) < 3*time.Second {
		if h.readyz(inst) != 200 {
			notReady++
		} else {
			t.Errorf("/readyz answered 200 while the database was down")
		}
		time.Sleep(200 * time.Millisecond)
	}
	down := time.Since(downAt)
	if err := pg.start(); err != nil {
		t.Fatal(err)
	}
	upAt := time.Now()
	// Expiry catching up is timed from the start, alongside the load.
	var expiredIn time.Duration
	expiredDone := make(chan bool, 1)
	go func() {
		_, ok := waitFor(30*time.Second, func() bool {
			var n int
			if err := h.db.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE id::text = ANY($1) AND status = 'expired'`, due).Scan(&n); err != nil {
				return ctx.Err() != nil // the harness's pool reconnects too; stop if the test ends
			}
			return n == dueN
		})
		expiredIn = time.Since(upAt)
		expiredDone <- ok
	}()
	readyIn, ok := waitFor(30*time.Second, func() bool { return h.readyz(inst) == 200 })
	if !ok {
		t.Fatalf("/readyz not 200 %s after the database came back", readyIn)
	}
	h.report("injected: database down %.1fs, then started again; /readyz 503 %.1fs after the stop (%d polls not ready while down), 200 again %.1fs after the start, by itself",
		down.Seconds(), took503.Seconds(), notReady, readyIn.Seconds())

	time.Sleep(2 * time.Second)
	ld.finish()
	heldN, _ := l.counts()
	if heldN <= heldBefore {
		t.Errorf("no hold acknowledged after the restart (%d before, %d in all)", heldBefore, heldN)
	}

	if !<-expiredDone {
		t.Errorf("holds that came due during the outage were not all expired within 30s of the database coming back")
	}
	var maxSeq int64
	relayIn, ok := waitFor(15*time.Second, func() bool {
		var pending int
		err := h.db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE seq IS NULL), coalesce(max(seq), 0) FROM stock_events`).Scan(&pending, &maxSeq)
		return err == nil && pending == 0
	})
	if !ok {
		t.Errorf("the relay did not publish every committed event within %s", relayIn)
	}
	for _, sub := range []*subscriber{steady, dropped} {
		if _, ok := waitFor(20*time.Second, func() bool { last, _, _, _, _ := sub.state(); return last >= maxSeq }); !ok {
			last, _, _, _, _ := sub.state()
			t.Errorf("subscriber %s stopped at seq %d of %d", sub.name, last, maxSeq)
		}
	}
	stopSubs()
	subs.Wait()
	var subReports []string
	for _, sub := range []*subscriber{steady, dropped} {
		last, received, resumes, violations, ends := sub.state()
		if len(violations) > 0 {
			t.Errorf("subscriber %s: %d ordering violations, e.g. %s", sub.name, len(violations), strings.Join(violations[:min(5, len(violations))], "; "))
		}
		if received != int(maxSeq) || last != maxSeq {
			t.Errorf("subscriber %s received %d events up to seq %d; the stream has %d", sub.name, received, last, maxSeq)
		}
		var why []string
		for _, k := range slices.Sorted(maps.Keys(ends)) {
			why = append(why, fmt.Sprintf("%s ×%d", k, ends[k]))
		}
		subReports = append(subReports, fmt.Sprintf("%s subscriber: seq 1..%d, %d events, 0 gaps/duplicates, resumed %d times (sessions ended: %s)",
			sub.name, last, received, resumes, strings.Join(why, ", ")))
	}
	h.report("%s", strings.Join(subReports, "; "))

	c := h.checkStore(ctx, l)
	var dueExpired int
	if err := h.db.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE id::text = ANY($1) AND status = 'expired'`, due).Scan(&dueExpired); err != nil {
		t.Fatal(err)
	}
	h.report("attempts: %s; %d keys retried until answered (%d had committed before the outage cut their answer off)", l.attemptSummary(), l.retried, l.replayed)
	h.report("verified: %s; %d/%d holds due during the outage expired afterwards (all %.1fs after the start), each once; reconciliation empty",
		c, dueExpired, dueN, expiredIn.Seconds())
}
