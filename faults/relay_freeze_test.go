package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/pgtest"
	"inventory/store"
)

// relayHolder is the backend that holds the relay's lock in this database,
// if any: its pid, its state and whether it waits for a lock itself.
func (h *harness) relayHolder(ctx context.Context) (pid int, state string, waiting, ok bool) {
	h.t.Helper()
	err := h.db.QueryRow(ctx, `
		SELECT l.pid, coalesce(a.state, ''), cardinality(pg_blocking_pids(l.pid)) > 0
		FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
		  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND ((l.classid::bigint << 32) | l.objid::bigint) = $1`, store.RelayLockKey).Scan(&pid, &state, &waiting)
	if err == pgx.ErrNoRows {
		return 0, "", false, false
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return pid, state, waiting, true
}

// unpublished counts the committed stock events that have no seq yet.
func (h *harness) unpublished(ctx context.Context) int {
	h.t.Helper()
	var n int
	if err := h.db.QueryRow(ctx, `SELECT count(*) FROM stock_events WHERE seq IS NULL`).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// waitPublished waits (generously) until every committed event has a seq.
func (h *harness) waitPublished(ctx context.Context, what string) {
	h.t.Helper()
	if took, ok := waitFor(60*time.Second, func() bool { return h.unpublished(ctx) == 0 }); !ok {
		h.t.Fatalf("%s: %d events still unpublished after %s", what, h.unpublished(ctx), took)
	}
}

// receive adds n units of sku at loc through the instance at url: one stock
// event.
func (h *harness) receive(url, sku, loc string, n int) {
	h.t.Helper()
	h.mutate(url, `mutation($c: String!, $l: String!, $q: Int!, $r: String!) { receiveStock(input: {sku: $c, location: $l, quantity: $q, reference: $r}) { userErrors { code message } } }`,
		map[string]any{"c": sku, "l": loc, "q": n, "r": "freeze-" + randomHex(6)}, "receiveStock")
}

func randomHex(n int) string { return fmt.Sprintf("%x", randomBytes(n)) }

// stopped says whether every thread of process pid is stopped (state T): a
// SIGSTOP has taken effect, not just been sent.
func stopped(pid int) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			return false
		}
		// pid (comm) state …: comm may hold spaces, so the state follows
		// the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) || s[i+2] != 'T' {
			return false
		}
	}
	return true
}

// freezeRelayHolder makes one of insts freeze (SIGSTOP) while its relay
// holds the lock, the way a hung VM or a long GC pause would: a row lock
// taken by the test on stock_events_head keeps the next relay transaction
// (which then holds the advisory lock) waiting in its last statement; one
// instance is stopped; the row lock is let go, the relay's statement ends,
// and if the stopped instance was the one relaying, its backend is left
// idle in transaction with the lock. A live instance commits within
// milliseconds, so a holder still there 2 s later is the stopped one (else
// it is resumed and the next attempt stops the other instance). It returns
// the frozen instance, its relay backend's pid, and when it went idle.
func (h *harness) freezeRelayHolder(ctx context.Context, sku, loc string, insts ...*instance) (*instance, int, time.Time) {
	h.t.Helper()
	for attempt := range 12 {
		candidate := insts[attempt%len(insts)]
		tx, err := h.db.Begin(ctx)
		if err != nil {
			h.t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM stock_events_head FOR UPDATE`); err != nil {
			h.t.Fatal(err)
		}
		h.receive(candidate.url, sku, loc, 1)
		var pid int
		if took, ok := waitFor(30*time.Second, func() bool {
			p, _, waiting, ok := h.relayHolder(ctx)
			pid = p
			return ok && waiting
		}); !ok {
			_ = tx.Rollback(ctx)
			h.t.Fatalf("no relay transaction waited on the head row within %s", took)
		}
		if err := syscall.Kill(candidate.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
			h.t.Fatal(err)
		}
		if took, ok := waitFor(10*time.Second, func() bool { return stopped(candidate.cmd.Process.Pid) }); !ok {
			h.t.Fatalf("instance %s not stopped %s after SIGSTOP", candidate.name, took)
		}
		if err := tx.Rollback(ctx); err != nil {
			h.t.Fatal(err)
		}
		idleSince := time.Now()
		time.Sleep(2 * time.Second)
		if p, state, _, ok := h.relayHolder(ctx); ok && p == pid {
			h.report("injected: SIGSTOP of instance %s (pid %d) inside its relay transaction (attempt %d): its backend %d is %q holding the relay lock",
				candidate.name, candidate.cmd.Process.Pid, attempt+1, pid, state)
			return candidate, pid, idleSince
		}
		// The other instance was relaying: it committed. Try again.
		if err := syscall.Kill(candidate.cmd.Process.Pid, syscall.SIGCONT); err != nil {
			h.t.Fatal(err)
		}
		h.waitPublished(ctx, "after a freeze attempt that missed")
	}
	h.t.Fatal("could not freeze an instance inside its relay transaction in 12 attempts")
	return nil, 0, time.Time{}
}

// TestFrozenRelayInstanceLosesTheLock: two instances relay one stream; one
// of them is frozen (SIGSTOP) inside its relay transaction, holding the
// relay's advisory lock — a long GC pause, a hung VM. A change made through
// the other instance must still be published: PostgreSQL ends the frozen
// holder's session INVENTORY_EVENTS_RELAY_TIMEOUT after it went idle, and the
// other instance takes the lock. When the frozen instance resumes it
// recovers by itself (ready again, relaying again) and the stream has no gap
// and no seq twice.
func TestFrozenRelayInstanceLosesTheLock(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pgtest.NewDatabase(t))
	a := h.start("A", nil)
	b := h.start("B", nil)
	h.createKeys()
	h.loadCatalog(a.url, stock{locations: []string{"AMS"}, quantity: map[string]map[string]int{"F-HP": {"AMS": 100}}})
	ctx := t.Context()
	h.waitPublished(ctx, "the catalog's events")

	frozen, backend, idleSince := h.freezeRelayHolder(ctx, "F-HP", "AMS", a, b)
	t.Cleanup(func() { _ = syscall.Kill(frozen.cmd.Process.Pid, syscall.SIGCONT) }) // before its stop
	live := b
	if frozen == b {
		live = a
	}
	h.receive(live.url, "F-HP", "AMS", 1)
	// /readyz is sampled once a second: a probe every 50 ms would spend the
	// test's address's read budget (429).
	codes := map[int]int{}
	var probed time.Time
	took, ok := waitFor(60*time.Second, func() bool {
		if time.Since(probed) >= time.Second {
			codes[h.readyz(live)]++
			probed = time.Now()
		}
		return h.unpublished(ctx) == 0
	})
	if !ok {
		_, state, _, held := h.relayHolder(ctx)
		t.Fatalf("a frozen instance stalled the stream: %d events unpublished %s after the freeze (relay lock still held: %v, by backend %d %q); /readyz of the live instance %s answered %v meanwhile",
			h.unpublished(ctx), time.Since(idleSince).Round(time.Millisecond), held, backend, state, live.name, codes)
	}
	var gone bool
	if err := h.db.QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, backend).Scan(&gone); err != nil {
		t.Fatal(err)
	}
	if !gone {
		t.Errorf("the frozen instance's relay backend %d still exists after the stream moved on", backend)
	}
	h.report("verified: instance %s published %.1f s after the frozen holder went idle (%.1f s after the change); the holder's backend ended by PostgreSQL: %v; /readyz of %s meanwhile: %v",
		live.name, time.Since(idleSince).Seconds(), took.Seconds(), gone, live.name, codes)

	// The frozen instance resumes: its relay transaction fails (its session
	// is gone), it retries with a new connection, and it is ready again.
	if err := syscall.Kill(frozen.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if took, ok := waitFor(60*time.Second, func() bool { return h.readyz(frozen) == 200 }); !ok {
		t.Fatalf("the resumed instance %s not ready %s after SIGCONT", frozen.name, took)
	}
	for range 3 {
		h.receive(frozen.url, "F-HP", "AMS", 1)
	}
	h.waitPublished(ctx, "after the frozen instance resumed")
	var n, distinct, lo, hi int64
	if err := h.db.QueryRow(ctx, `SELECT count(*), count(DISTINCT seq), coalesce(min(seq), 0), coalesce(max(seq), 0) FROM stock_events`).Scan(&n, &distinct, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if n != distinct || hi-lo+1 != n || lo != 1 {
		t.Fatalf("the stream after the freeze: %d events, %d distinct seqs, %d..%d; want 1..%d each once", n, distinct, lo, hi, n)
	}
	h.report("verified: %s ready again after SIGCONT; %d events numbered 1..%d, each once, no gap", frozen.name, n, hi)
}
