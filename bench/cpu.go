package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// cellCPU is the CPU one write cell's sides used, from /proc: the server
// process (ours or the naive one; pgbench's cells have none) and the
// PostgreSQL cluster, so a row shows what its holds cost next to how fast
// they came.
type cellCPU struct {
	server, pg float64 // CPU seconds over the cell
	hasServer  bool
}

// perThousand is the CPU seconds per 1,000 of n holds.
func (c cellCPU) perThousand(n int) (server, pg float64) {
	if n <= 0 {
		return 0, 0
	}
	return c.server * 1000 / float64(n), c.pg * 1000 / float64(n)
}

// findPostmaster is the PID of the postmaster behind pool: the parent of
// one of its backends, when that process is on this machine and is
// PostgreSQL's; 0 otherwise (a database elsewhere: no PostgreSQL CPU).
func findPostmaster(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var backend int
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return 0, fmt.Errorf("backend pid: %w", err)
	}
	pm := parentPid(backend)
	if pm <= 1 || !isPostgres(backend) || !isPostgres(pm) {
		return 0, nil
	}
	return pm, nil
}

// isPostgres says whether process pid runs PostgreSQL's binary.
func isPostgres(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	argv0, _, _ := strings.Cut(string(b), "\x00")
	return strings.Contains(argv0, "postgres")
}

// measureCPU starts measuring a cell: the server process serverPid (0 for
// none) and the cluster of postmaster (0: not measured). The function it
// returns ends the measurement; it returns nil when PostgreSQL's CPU cannot
// be read here.
func measureCPU(serverPid, postmaster int) func() *cellCPU {
	if postmaster == 0 {
		return func() *cellCPU { return nil }
	}
	s0, p0 := serverTicks(serverPid), treeTicks(postmaster)
	return func() *cellCPU {
		s1, p1 := serverTicks(serverPid), treeTicks(postmaster)
		return &cellCPU{server: float64(s1-s0) / ticksPerSecond, pg: float64(p1-p0) / ticksPerSecond, hasServer: serverPid != 0}
	}
}

func serverTicks(pid int) int64 {
	if pid == 0 {
		return 0
	}
	return cpuTicks(pid, false)
}
