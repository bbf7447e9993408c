package faults

import (
	"sync/atomic"
	"testing"
	"time"

	"inventory/pgtest"
)

// TestKillInstanceMidReserve: two instances serve one database while 24
// clients reserve through both; one instance is killed with SIGKILL in the
// middle of the load. Clients whose request got no answer retry with the
// same requestKey and inputs on the surviving instance until they get one.
// Afterwards every acknowledged hold exists exactly once, with its lines, no
// key refused has a row, no unit is held twice, and the stock reconciles.
func TestKillInstanceMidReserve(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pgtest.NewDatabase(t))
	a := h.start("A", nil)
	b := h.start("B", nil)
	h.createKeys()
	s := stock{
		locations: []string{"AMS", "BER"},
		quantity: map[string]map[string]int{
			"K-HP": {"AMS": 400, "BER": 100}, "K-CABLE": {"AMS": 400, "BER": 100},
			"K-MOUSE":   {"AMS": 400, "BER": 100},
			"K-CONSOLE": {"AMS": 40, "BER": 10}, // scarce: OUT_OF_STOCK under contention
		},
		codes: map[string]int{"K-GIFT": 300},
	}
	h.loadCatalog(b.url, s)

	var killed atomic.Bool
	urls := func() []string {
		if killed.Load() {
			return []string{b.url}
		}
		return []string{a.url, b.url}
	}
	l := newLedger()
	ld := h.startLoad(t.Context(), l, 24, "kill", s, 600, urls, 5*time.Millisecond)
	defer ld.abort()
	time.Sleep(1500 * time.Millisecond)
	heldBefore, _ := l.counts()
	a.kill9()
	killed.Store(true)
	h.report("injected: SIGKILL of instance A (pid %d) after %d holds were acknowledged; load continues on B", a.cmd.Process.Pid, heldBefore)
	time.Sleep(2 * time.Second)
	ld.finish()

	heldN, refusedN := l.counts()
	if heldN <= heldBefore {
		t.Errorf("no hold acknowledged after the kill (%d before, %d in all): the surviving instance did not serve", heldBefore, heldN)
	}
	if l.retried == 0 {
		t.Errorf("no request was cut off by the kill: the fault hit nothing (attempts: %s)", l.attemptSummary())
	}
	c := h.checkStore(t.Context(), l)
	if c.acknowledged != heldN || c.found != heldN {
		t.Errorf("%d holds acknowledged, %d found", heldN, c.found)
	}
	if code := h.readyz(b); code != 200 {
		t.Errorf("surviving instance /readyz: %d", code)
	}
	h.report("attempts: %s; %d keys retried on B after no answer (%d of them had committed on A and came back as replays); refused: %v",
		l.attemptSummary(), l.retried, l.replayed, refusedN)
	h.report("verified: %s, reconciliation empty", c)
}
