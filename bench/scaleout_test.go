package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSetEnvReplaces: a server of the scale-out row gets exactly one
// DATABASE_URL, the one given, and the other entries stay.
func TestSetEnvReplaces(t *testing.T) {
	t.Parallel()
	env := setEnv([]string{"DATABASE_URL=a", "PATH=/bin", "DATABASE_URL_X=keep"}, "DATABASE_URL=b", "INVENTORY_DB_POOLER=transaction")
	got := strings.Join(env, " ")
	if want := "PATH=/bin DATABASE_URL_X=keep DATABASE_URL=b INVENTORY_DB_POOLER=transaction"; got != want {
		t.Fatalf("setEnv: %q, want %q", got, want)
	}
}

// TestServerEnvDropsCallersDatabases: the caller's DATABASE_DIRECT_URL or
// DATABASE_REPLICA_URL must not reach a bench server.
func TestServerEnvDropsCallersDatabases(t *testing.T) {
	t.Setenv("DATABASE_REPLICA_URL", "postgres://elsewhere/db")
	t.Setenv("DATABASE_DIRECT_URL", "postgres://elsewhere/db")
	for _, kv := range serverEnv("postgres://bench/db", 4, "") {
		if strings.HasPrefix(kv, "DATABASE_") && kv != "DATABASE_URL=postgres://bench/db" {
			t.Errorf("serverEnv passes on %q", kv)
		}
	}
}

func TestWithDB(t *testing.T) {
	t.Parallel()
	got := withDB("postgres://u:p@127.0.0.1:5/inventory?sslmode=disable", "inventory_bench_1", "inventory-bench")
	if want := "postgres://u:p@127.0.0.1:5/inventory_bench_1?application_name=inventory-bench&sslmode=disable"; got != want {
		t.Fatalf("withDB: %q, want %q", got, want)
	}
}

func TestTopWaits(t *testing.T) {
	t.Parallel()
	if got, want := topWaits(map[string]int{"CPU": 6, "IO:WALSync": 3, "Lock:tuple": 1}, 2), "CPU 60%, IO:WALSync 30%"; got != want {
		t.Fatalf("topWaits: %q, want %q", got, want)
	}
	if got := topWaits(nil, 2); got != "none active" {
		t.Fatalf("topWaits(nil): %q", got)
	}
}

// TestTreeTicksCountsExitedChildren: CPU a child burnt before it exited
// still counts in its parent's tree (cutime, once reaped), so a backend
// that ends mid-cell is neither lost nor counted twice.
func TestTreeTicksCountsExitedChildren(t *testing.T) {
	t.Parallel()
	before := treeTicks(os.Getpid())
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done")
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	burnt := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	after := treeTicks(os.Getpid())
	if burnt < 100*time.Millisecond {
		t.Skipf("the child burnt only %s in %s: too little to measure in ticks", burnt, time.Since(t0))
	}
	got := time.Duration(after-before) * time.Second / ticksPerSecond
	if got < burnt*8/10 {
		t.Fatalf("tree CPU grew by %s, the child alone burnt %s", got, burnt)
	}
}

// TestScaleoutMarkdownTargets: the three-instance cell is judged against
// the mean of the reference cells (one instance direct, first and last) at
// the same client count, and the connection line says whether the pooled
// connections stayed within PgBouncer's bound.
func TestScaleoutMarkdownTargets(t *testing.T) {
	t.Parallel()
	cell := func(name string, instances int, pooled bool, ok, conns int) scaleCell {
		return scaleCell{name: name, instances: instances, pooled: pooled, clients: 64, res: loadResult{ok: ok, elapsed: time.Second}, pooledConns: conns, check: "ok"}
	}
	first, last := cell("direct", 1, false, 900, 0), cell("direct again", 1, false, 1100, 0)
	first.reference, last.reference = true, true
	r := &scaleResult{serverConn: 20, cellDur: time.Second, cells: []scaleCell{
		first, cell("one", 1, true, 950, 12), cell("three", 3, true, 890, 20), cell("three direct", 3, false, 2000, 0), last,
	}}
	md := r.markdown()
	if !strings.Contains(md, "| three | 64 | 890 |") || !strings.Contains(md, "| 0.89 | ≥ 0.9 ✗ |") {
		t.Fatalf("three-instance cell not judged at 0.89:\n%s", md)
	}
	if !strings.Contains(md, "12 with 1 instance, 20 with 3") || !strings.Contains(md, "not by N ✓") {
		t.Fatalf("connection line:\n%s", md)
	}
	r.cells[2].pooledConns = 21
	if !strings.Contains(r.markdown(), "not by N ✗") {
		t.Fatal("21 server connections through a pool of 20 passed")
	}
}
