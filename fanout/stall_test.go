package fanout_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"inventory/domain"
	"inventory/fanout"
)

// bigStockChanged selects the pad too: messages of 16 KiB fill a socket
// that is not read (setup's send buffers) within a few events.
const bigStockChanged = `subscription($after: Int) { stockChanged(after: $after) { seq sku viewer pad } }`

// setupSlow serves cfg with padded events and subscribes two members to
// bigStockChanged: fast reads, slow's socket has a small window and is not
// read until the test says so.
func setupSlow(t *testing.T, cfg fanout.Config, pad int) (e *env, fast, slow *wsClient) {
	t.Helper()
	e = setup(t, cfg)
	e.feed.pad = strings.Repeat("x", pad)
	fast = e.dial("ops", false, false)
	fast.subscribe("f", bigStockChanged, nil)
	slow = e.dial("ops", false, true)
	slow.subscribe("s", bigStockChanged, nil)
	e.waitStats(1, 2)
	return e, fast, slow
}

// publishUntilCut publishes events four at a time, each step read by fast
// before the next (so fast never falls behind), until the registry has
// cut a member off, then three steps more; it returns what fast got and
// how many events there were when the cut was seen.
func publishUntilCut(t *testing.T, e *env, fast *wsClient) (fastGot []stockEvent, atCut int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for after := -1; after != 0; after-- {
		if time.Now().After(deadline) || len(fastGot) > 5000 {
			t.Fatalf("no member was cut off after %d events (stats %+v)", len(fastGot), e.reg.Stats())
		}
		if after < 0 && e.reg.Stats().Cut > 0 {
			atCut, after = len(fastGot), 3
		}
		for i := range 4 {
			e.feed.publish("HP", i)
		}
		for range 4 {
			var ev stockEvent
			fast.data("f", "stockChanged", &ev)
			fastGot = append(fastGot, ev)
		}
	}
	requireDense(t, fastGot, 1)
	t.Logf("cut seen after %d events, %d in all", atCut, len(fastGot))
	return fastGot, atCut
}

// readUntilEnd reads slow's events until its subscription ends, and
// returns them with the end's message.
func readUntilEnd(t *testing.T, slow *wsClient) (got []stockEvent, ended string) {
	t.Helper()
	for {
		m, err := slow.next(10 * time.Second)
		if err != nil {
			t.Fatalf("slow member after %d events: %v", len(got), err)
		}
		switch m.Type {
		case "next":
			var ev stockEvent
			decodeField(t, m.Payload, "stockChanged", &ev)
			got = append(got, ev)
		case "error":
			return got, string(m.Payload)
		default:
			t.Fatalf("slow member: %+v", m)
		}
	}
}

// TestSlowMemberIsCutOffWithItsCursor: a stockChanged member that stops
// reading (its socket's window full) while its backlog stays past
// Config.Backlog for StallTimeout is cut off — long before the hard bound
// — with the seq of the first event it did not get, after receiving every
// event before it in order; resuming from there gives exactly the rest.
// The other member gets every event meanwhile, in order.
func TestSlowMemberIsCutOffWithItsCursor(t *testing.T) {
	t.Parallel()
	const backlog, stall = 8, 300 * time.Millisecond
	e, fast, slow := setupSlow(t, fanout.Config{Backlog: backlog, StallTimeout: stall, Flush: 20 * time.Millisecond}, 16<<10)
	fastGot, atCut := publishUntilCut(t, e, fast)

	slowGot, ended := readUntilEnd(t, slow)
	if len(slowGot) == 0 || len(slowGot) >= atCut {
		t.Fatalf("slow member got %d of %d events before it was cut off (%s)", len(slowGot), atCut, ended)
	}
	requireDense(t, slowGot, 1)
	next := slowGot[len(slowGot)-1].Seq + 1
	if !strings.Contains(ended, "SUBSCRIPTION_ENDED") || !strings.Contains(ended, fmt.Sprintf("disconnected at seq %d;", next)) {
		t.Fatalf("cut-off message %s, want SUBSCRIPTION_ENDED at seq %d", ended, next)
	}
	// Its backlog when it was cut was at most what was published when the
	// cut was seen, less what it took: the stall timeout cut it, not the
	// hard bound.
	if behind := atCut - len(slowGot); behind > backlog*fanout.HardBacklogFactor {
		t.Fatalf("cut %d events behind: past the hard bound, so not by the stall timeout", behind)
	}
	reports := e.cutReports()
	var stalled *domain.ErrSubscriberStalled
	if len(reports) != 1 || !errors.As(reports[0], &stalled) || stalled.Next != next || stalled.Timeout != stall {
		t.Fatalf("reported %v, want one ErrSubscriberStalled at seq %d after %s", reports, next, stall)
	}
	if s := e.reg.Stats(); s.Cut != 1 || s.Members != 1 || s.Groups != 1 {
		t.Fatalf("stats %+v: want one member cut, the other still in its group", s)
	}

	// Resuming from its cursor continues with exactly the next event.
	again := e.dial("ops", false, false)
	again.subscribe("r", bigStockChanged, map[string]any{"after": next - 1})
	for want := next; want < next+3; want++ {
		var ev stockEvent
		again.data("r", "stockChanged", &ev)
		if ev != fastGot[want-1] {
			t.Fatalf("resumed with %+v, want %+v", ev, fastGot[want-1])
		}
	}
}

// TestMemberFarBehindIsCutAtOnce: a stockChanged member whose backlog
// passes Backlog × HardBacklogFactor is cut off at the next flush, however
// long the stall timeout (an hour here), with its cursor: the group's log
// stays bounded by its slowest member's hard bound.
func TestMemberFarBehindIsCutAtOnce(t *testing.T) {
	t.Parallel()
	e, fast, slow := setupSlow(t, fanout.Config{Backlog: 1, StallTimeout: time.Hour, Flush: 20 * time.Millisecond}, 16<<10)
	_, atCut := publishUntilCut(t, e, fast)

	slowGot, ended := readUntilEnd(t, slow)
	requireDense(t, slowGot, 1)
	next := int64(len(slowGot)) + 1
	if behind := atCut - len(slowGot); behind <= fanout.HardBacklogFactor {
		t.Fatalf("cut %d events behind, within the hard bound of %d", behind, fanout.HardBacklogFactor)
	}
	if !strings.Contains(ended, fmt.Sprintf("disconnected at seq %d;", next)) {
		t.Fatalf("cut-off message %s, want seq %d", ended, next)
	}
	if s := e.reg.Stats(); s.Cut != 1 || s.Members != 1 {
		t.Fatalf("stats %+v: want one member cut, one left", s)
	}
}

// latestPair subscribes fast and slow (whose socket is not read) to
// availabilityChanged for A and B, padded, then publishes steps values of
// each, every step read by fast before the next (so fast never falls
// behind), calling during after each step; it checks that fast got every
// value, in order.
func latestPair(t *testing.T, cfg fanout.Config, steps int, during func(e *env)) (e *env, slow *wsClient) {
	t.Helper()
	e = setup(t, cfg)
	e.feed.pad = strings.Repeat("x", 16<<10)
	const doc = `subscription { availabilityChanged(skus: ["A", "B"]) { sku available pad } }`
	fast := e.dial("", false, false)
	fast.subscribe("f", doc, nil)
	slow = e.dial("", false, true)
	slow.subscribe("s", doc, nil)
	e.waitStats(1, 2)
	for i := 1; i <= steps; i++ {
		e.feed.publish("A", i)
		e.feed.publish("B", i)
		for got := map[string]int{}; got["A"] != i || got["B"] != i; {
			var v availability
			fast.data("f", "availabilityChanged", &v)
			if v.Available <= got[v.SKU] {
				t.Fatalf("fast member: %s went from %d to %d", v.SKU, got[v.SKU], v.Available)
			}
			got[v.SKU] = v.Available
		}
		during(e)
	}
	return e, slow
}

type availability struct {
	SKU       string
	Available int
}

// catchUp reads slow until it has the value steps for A and B, checking
// that no value is older than one before it; it returns how many values
// it read.
func catchUp(t *testing.T, slow *wsClient, steps int) int {
	t.Helper()
	got, n := map[string]int{}, 0
	for got["A"] != steps || got["B"] != steps {
		var v availability
		slow.data("s", "availabilityChanged", &v)
		if v.Available <= got[v.SKU] {
			t.Fatalf("slow member: %s went from %d to %d", v.SKU, got[v.SKU], v.Available)
		}
		got[v.SKU] = v.Available
		n++
	}
	return n
}

// TestLatestMemberCatchesUpWithNewestValues: an availabilityChanged member
// that stops reading is never cut off, however long it stalls: when it
// reads again it is sent the newest value of each SKU, skipping what it
// missed, never an older value after a newer one. The other member
// meanwhile gets every value.
func TestLatestMemberCatchesUpWithNewestValues(t *testing.T) {
	t.Parallel()
	const steps = 100 // 200 values of 16 KiB: many times what the socket holds
	e, slow := latestPair(t, fanout.Config{StallTimeout: 100 * time.Millisecond}, steps, func(*env) {})
	if n := catchUp(t, slow, steps); n >= steps {
		t.Fatalf("the slow member was sent %d of %d values: it was not caught up with the newest", n, 2*steps)
	}
	if s := e.reg.Stats(); s.Cut != 0 || s.Members != 2 {
		t.Fatalf("stats %+v: want no member cut", s)
	}
}

// TestLatestGroupLogIsBounded: while an availabilityChanged member is far
// behind, its group's log holds at most Backlog × HardBacklogFactor
// messages (plus those of the flush under way): past that the member is
// moved on to the newest values, and still catches up with them.
func TestLatestGroupLogIsBounded(t *testing.T) {
	t.Parallel()
	const steps, backlog = 150, 1
	bound := backlog*fanout.HardBacklogFactor + 2 // a step's two values arrive between flushes
	longest := 0
	e, slow := latestPair(t, fanout.Config{Backlog: backlog}, steps, func(e *env) {
		longest = max(longest, fanout.LogLen(e.reg))
	})
	if longest > bound {
		t.Fatalf("the group's log held %d messages, want at most %d", longest, bound)
	}
	if longest < bound/2 {
		t.Fatalf("the group's log never held more than %d messages: the slow member never fell behind", longest)
	}
	catchUp(t, slow, steps)
	if s := e.reg.Stats(); s.Cut != 0 {
		t.Fatalf("stats %+v: want no member cut", s)
	}
}
