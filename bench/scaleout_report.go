package main

import (
	"fmt"
	"strings"
)

// markdown renders the scale-out row: per cell the reserve throughput and
// its ratio to the reference (one instance direct, the mean of its cells
// first and last), the primary's server connections, the
// standby's replay lag, CPU and holds per core, and the replica reads.
func (r *scaleResult) markdown() string {
	var b strings.Builder
	b.WriteString("\n## Scale-out: PgBouncer in transaction mode, a streaming standby\n\n")
	fmt.Fprintf(&b, "Reserve of 1 unit of 10,000 SKUs (checkout token), clients round-robin over the instances, %s per cell after a 1 s warm-up; topology from `scripts/cluster.sh db` (its own primary, `pg_basebackup` standby and PgBouncer 1.18, pool_mode = transaction, at most %d server connections in all). Direct: `DATABASE_URL` on the primary, no standby. The ratios are to the mean of the two cells of one instance direct, run first and last (drift over the row, such as autovacuum analyzing the seeded tables, weighs on both ends). Through PgBouncer: `DATABASE_URL` on PgBouncer with `INVENTORY_DB_POOLER=transaction`, `DATABASE_DIRECT_URL` on the primary (River's pool, `LISTEN`), `DATABASE_REPLICA_URL` on the standby. Connections are the peaks, sampled every %s, of the primary's backends on the bench database: lent by PgBouncer (SHOW SERVERS' remote_pid) and held by the instances themselves (by application_name). Replay lag: `pg_stat_replication.replay_lag` on the primary, and instance 1's `inventory_replica_lag_seconds` (scraped once a second). CPU from /proc/<pid>/stat over the cell (PostgreSQL: the postmaster and all its backends); holds/s per core = holds / CPU seconds. Commits per hold: `pg_stat_database.xact_commit` over the cell (batches and everything else the instances do) ÷ holds; the batch mean from `inventory_reserve_batch_requests_total` ÷ `inventory_reserve_batches_total`; wait events: the active backends' share per `wait_event` (CPU when none), over the samples. Before the load each cell's instances are watched idle for %s.\n\n",
		r.cellDur, r.serverConn, scaleSampleEvery, idleSpan)
	if r.altBin != "" {
		fmt.Fprintf(&b, "**A/B**: the three-instance cells ran `%s`, the others `-bin`'s server.\n\n", r.altBin)
	}
	b.WriteString("| topology | clients | holds/s | p50 | p99 | failed | ratio to 1 direct (mean of first and last) | target | server conns via PgBouncer | direct (per pool) | cl_waiting peak | replay lag p99 (replication / metric) | target | CPU cores: primary / instances / PgBouncer / standby | holds/s per primary core | per instance core | replica reads (standby / primary) | commits per hold | reserve batch mean | active backends' wait events | idle instances: commits/s, primary cores | check |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---|---|---|---:|---:|---|---:|---:|---|---|---|\n")
	for _, c := range r.cells {
		ratio, tgt, lag, lagTgt, bouncer, reads := "", "", "", "", "", ""
		ratio = fmt.Sprintf("%.2f", r.ratio(c))
		if c.pooled {
			if c.instances == 3 {
				tgt = fmt.Sprintf("≥ 0.9 %s", mark(r.ratio(c) >= 0.9))
			}
			bouncer = fmt.Sprintf("%.2f", c.bouncerCPU/r.cellDur.Seconds())
			reads = fmt.Sprintf("%d / %d", c.standbyReads, c.primaryReads)
		}
		lag = fmt.Sprintf("%.0f ms", c.replayLag.quantile(0.99))
		if c.metricLag.n > 0 {
			lag += fmt.Sprintf(" / %.0f ms", c.metricLag.quantile(0.99))
		}
		worst := max(c.replayLag.quantile(0.99), c.metricLag.quantile(0.99))
		lagTgt = fmt.Sprintf("< 1 s %s", mark(worst < 1000))
		secs := r.cellDur.Seconds()
		fmt.Fprintf(&b, "| %s | %d | %.0f | %.2f | %.2f | %d | %s | %s | %d | %d (%s) | %d | %s | %s | %.2f / %.2f / %s / %.2f | %.0f | %.0f | %s | %.2f | %.1f (%.0f%% batched, %d failed) | %s | %.0f, %.2f | %s |\n",
			c.name, c.clients, c.res.opsPerSec(), c.res.lat.quantile(0.5), c.res.lat.quantile(0.99), c.res.failed, ratio, tgt,
			c.pooledConns, c.directConns, c.directByApp, c.clWaiting, lag, lagTgt,
			c.primaryCPU/secs, c.instancesCPU/secs, orDash(bouncer), c.standbyCPU/secs,
			c.holdsPerCore(c.primaryCPU), c.holdsPerCore(c.instancesCPU), orDash(reads), c.commitsPerHold, c.batchSize, 100*c.batchedShare, c.batchFailures, c.waits, c.idleCommits, c.idlePrimaryCores, c.check)
	}
	// Server connections constant in N: the pooled cells at one client count.
	for _, c1 := range r.cells {
		if !c1.pooled || c1.instances != 1 { // the pooled cells compared
			continue
		}
		for _, c3 := range r.cells {
			if c3.pooled && c3.instances == 3 && c3.clients == c1.clients {
				fmt.Fprintf(&b, "\nServer connections through PgBouncer at %d clients: %d with 1 instance, %d with 3 (target: constant in N: bounded by PgBouncer's %d, not by N %s); direct ones per instance: %d with 1, %d with 3 (River's pool and LISTEN, %d each).\n",
					c1.clients, c1.pooledConns, c3.pooledConns, r.serverConn, mark(c1.pooledConns <= r.serverConn && c3.pooledConns <= r.serverConn),
					c1.directConns, c3.directConns, c3.directConns/3)
			}
		}
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
