package faults

import (
	"testing"
	"time"
)

// TestPgBouncerRestartUnderLoad: two instances reach their database through
// a PgBouncer of the test's own in transaction mode (10 server connections
// for both), sessions going direct to the primary; while 8 clients reserve
// through both, PgBouncer is stopped (SIGTERM: every client and server
// connection dropped at once), kept down for a second and started again.
// Clients retry with the same key until answered. Both instances serve again
// by themselves; every acknowledged hold exists exactly once, nothing is
// half-done, the stock reconciles (counted in SQL on the primary).
func TestPgBouncerRestartUnderLoad(t *testing.T) {
	t.Parallel()
	pg := newCluster(t)
	db := pg.createDatabase("faults")
	bnc := newBouncer(t, pg, 10)
	h := newHarness(t, db)
	pooled := bnc.pooledEnv("faults")
	a := h.start("A", pooled) // migrates, over the direct URL
	b := h.start("B", pooled)
	h.createKeys()
	s := stock{
		locations: []string{"AMS", "BER"},
		quantity: map[string]map[string]int{
			"B-HP": {"AMS": 2000, "BER": 500}, "B-CABLE": {"AMS": 2000, "BER": 500},
			"B-CONSOLE": {"AMS": 40, "BER": 10}, // scarce: OUT_OF_STOCK under contention
		},
		codes: map[string]int{"B-GIFT": 300},
	}
	h.loadCatalog(a.url, s)

	l := newLedger()
	ld := h.startLoad(t.Context(), l, 8, "bouncer", s, 600, func() []string { return []string{a.url, b.url} }, 5*time.Millisecond)
	defer ld.abort()
	time.Sleep(1500 * time.Millisecond)
	heldBefore, _ := l.counts()
	bnc.stop()
	h.report("injected: PgBouncer stopped (SIGTERM, every connection dropped) under load after %d holds; down for 1s", heldBefore)
	time.Sleep(time.Second)
	bnc.start(bnc.proc.Path)
	heldAtRestart, _ := l.counts()
	servedIn, ok := waitFor(20*time.Second, func() bool { n, _ := l.counts(); return n > heldAtRestart+50 })
	if !ok {
		t.Errorf("fewer than 50 holds acknowledged within %s of PgBouncer's restart", servedIn)
	}
	time.Sleep(time.Second)
	ld.finish()

	if l.retried == 0 {
		t.Errorf("no request was cut off by the restart: the fault hit nothing (attempts: %s)", l.attemptSummary())
	}
	for _, inst := range []*instance{a, b} {
		if code := h.readyz(inst); code != 200 {
			t.Errorf("instance %s /readyz %d after PgBouncer came back", inst.name, code)
		}
	}
	heldN, _ := l.counts()
	c := h.checkStore(t.Context(), l)
	if c.acknowledged != heldN || c.found != heldN {
		t.Errorf("%d holds acknowledged, %d found", heldN, c.found)
	}
	h.report("recovered by itself: 50 more holds %.1fs after PgBouncer started again; attempts: %s; %d keys retried (%d replays)",
		servedIn.Seconds(), l.attemptSummary(), l.retried, l.replayed)
	h.report("verified: %s, reconciliation empty", c)
}
