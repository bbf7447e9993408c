package main

import (
	"context"
	"fmt"
)

// runCells runs, for each client count, each baseline cell followed by
// the scenarios compared with it: the write rows as pgbench, the naive
// server, then ours, interleaved, so all three see the same machine state.
func (b *bench) runCells(ctx context.Context, rep *report) error {
	cell := 0
	kept := 0 // cells per client count: the scenarios run and their baselines
	for _, base := range baselines {
		if baselineWanted(b.opts, base.key) {
			kept++
		}
	}
	for _, sc := range scenarios {
		if b.opts.wants(sc.key) {
			kept++
		}
	}
	total := len(b.opts.clients) * kept
	for _, clients := range b.opts.clients {
		peers := map[string]*row{} // each baseline's row at this client count
		for _, base := range baselines {
			if !baselineWanted(b.opts, base.key) {
				continue
			}
			cell++
			logf("[%d/%d] %s, %d clients", cell, total, base.name, clients)
			r, err := b.runBaseline(ctx, base, cell, clients)
			if err != nil {
				return err
			}
			rep.rows = append(rep.rows, r)
			peers[base.key] = &r
			for _, sc := range scenarios {
				if sc.after() != base.key || !b.opts.wants(sc.key) {
					continue
				}
				cell++
				logf("[%d/%d] %s, %d clients", cell, total, sc.name, clients)
				r, err := b.runScenario(ctx, sc, cell, clients, peers)
				if err != nil {
					return err
				}
				rep.peakRSS = max(rep.peakRSS, r.rssMB)
				rep.rows = append(rep.rows, r)
			}
		}
	}
	return nil
}

// runBaseline runs one baseline cell: pgbench, or a closed loop against
// the ceiling or the naive server, then gives back what it claimed.
func (b *bench) runBaseline(ctx context.Context, base baseline, cell, clients int) (row, error) {
	r := row{key: base.key, name: base.name, baseline: true, clients: clients}
	serverPid := 0
	if base.naive {
		serverPid = b.naive.pid()
	}
	cpu := measureCPU(serverPid, b.postmaster)
	if base.http != nil {
		r.res = closedLoop(ctx, clients, b.opts.cellDur, base.http(b, cell, clients))
		if base.writes {
			r.cpu = cpu()
		}
		if r.res.failed > 0 {
			logf("  %d requests failed, first: %v", r.res.failed, r.res.firstErr)
		}
		if base.naive {
			if err := resetNaive(ctx, b.pool, b.naiveCat); err != nil {
				return r, err
			}
		}
	} else {
		var err error
		if r.res, err = runPgbench(ctx, b.dbURL, b.sqlDir, base.script, clients, b.opts.cellDur, b.cat); err != nil {
			return r, err
		}
		if base.writes {
			r.cpu = cpu()
		}
		if err := resetPgbenchRows(ctx, b.pool, b.cat); err != nil {
			return r, err
		}
	}
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	logf("  %.0f tps, p50 %.2f ms, p99 %.2f ms%s", r.res.opsPerSec(), r.res.lat.quantile(0.5), r.res.lat.quantile(0.99), r.cpuNote())
	return r, nil
}

// runScenario runs one of our cells, compared with the baselines' rows at
// the same client count (peers), and checks the invariants after it.
func (b *bench) runScenario(ctx context.Context, sc scenario, cell, clients int, peers map[string]*row) (row, error) {
	rss := sampleRSS(b.srv.cmd.Process.Pid)
	var bg chan loadResult
	if sc.background != nil {
		bg = make(chan loadResult, 1)
		load := sc.background(b, cell, clients)
		go func() { bg <- closedLoop(ctx, clients, b.opts.cellDur, load) }()
	}
	cpu := measureCPU(b.srv.cmd.Process.Pid, b.postmaster)
	res := closedLoop(ctx, clients, b.opts.cellDur, sc.make(b, cell, clients))
	r := row{key: sc.key, name: sc.name, clients: clients, res: res, target: sc.target, ceilTarget: sc.ceilingTarget,
		pgbench: peers[sc.base], naive: peers[sc.naive]}
	if sc.writes() {
		r.cpu = cpu()
	}
	if bg != nil {
		if bgRes := <-bg; bgRes.failed > 0 {
			logf("  background load: %d requests failed, first: %v", bgRes.failed, bgRes.firstErr)
		} else {
			logf("  background load: %.0f ops/s", bgRes.opsPerSec())
		}
	}
	r.rssMB = rss.done()
	if p := peers[sc.base]; p != nil {
		r.baseOps = p.res.opsPerSec()
	}
	if p := peers[sc.ceiling]; p != nil {
		r.ceilOps = p.res.opsPerSec()
	}
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	problem, err := b.checkInvariants(ctx)
	if err != nil {
		return r, err
	}
	r.check = "ok"
	if problem != "" {
		r.check = "FAIL: " + problem
	}
	if res.failed > 0 {
		logf("  %d requests failed, first: %v", res.failed, res.firstErr)
	}
	logf("  %.0f ops/s, p50 %.1f ms, p99 %.1f ms, ratio %.2f%s%s%s, RSS %.0f MB, check %s",
		res.opsPerSec(), res.lat.quantile(0.5), res.lat.quantile(0.99), r.ratio(), r.ceilingNote(), r.naiveNote(), r.cpuNote(), r.rssMB, r.check)
	return r, nil
}

// baselineWanted says whether a baseline row runs: when one of the
// scenarios compared with it does.
func baselineWanted(o options, key string) bool {
	for _, sc := range scenarios {
		if (sc.base == key || sc.ceiling == key || sc.naive == key) && o.wants(sc.key) {
			return true
		}
	}
	return false
}

// naiveWanted says whether the run needs the naive server.
func naiveWanted(o options) bool {
	for _, base := range baselines {
		if base.naive && baselineWanted(o, base.key) {
			return true
		}
	}
	return false
}

// cpuNote is ", CPU per 1,000 holds: server 0.21 s + PostgreSQL 0.30 s"
// for a row whose CPU was measured.
func (r row) cpuNote() string {
	if r.cpu == nil {
		return ""
	}
	srv, pg := r.cpu.perThousand(r.res.ok)
	if !r.cpu.hasServer {
		return fmt.Sprintf(", CPU per 1,000 holds: PostgreSQL %.2f s", pg)
	}
	return fmt.Sprintf(", CPU per 1,000 holds: server %.2f s + PostgreSQL %.2f s", srv, pg)
}
