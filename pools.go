package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"
)

// pools are the server's connections to PostgreSQL, one pool per kind of
// work, so that no kind can starve another: requests queued on a hot
// balance can take every request connection, and expiry jobs and the event
// relay still run on theirs, so holds expire on time and live stock stays
// live exactly during a flash sale.
type pools struct {
	api    *pgxpool.Pool // HTTP requests and subscriptions' reads (INVENTORY_DB_MAX_CONNS)
	jobs   *pgxpool.Pool // River: expiry jobs, sweeper, reconciliation (INVENTORY_DB_JOB_CONNS)
	events *pgxpool.Pool // the event relay and catch-up reads (INVENTORY_DB_EVENT_CONNS)
}

// openPools opens the three pools, closing what it opened if one fails.
func openPools(ctx context.Context, cfg config) (*pools, error) {
	p := &pools{}
	var err error
	if p.api, err = openPool(ctx, cfg, "api", cfg.DBMaxConns); err != nil {
		return nil, err
	}
	if p.jobs, err = openPool(ctx, cfg, "jobs", cfg.DBJobConns); err != nil {
		p.close()
		return nil, err
	}
	if p.events, err = openPool(ctx, cfg, "events", cfg.DBEventConns); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *pools) close() {
	for _, pool := range []*pgxpool.Pool{p.api, p.jobs, p.events} {
		if pool != nil {
			pool.Close()
		}
	}
}

// openPool opens one pool of size connections, named purpose in
// pg_stat_activity (application_name inventory-<purpose>), with the server's
// session settings.
func openPool(ctx context.Context, cfg config, purpose string, size int32) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	pcfg.MaxConns = size
	params := pcfg.ConnConfig.RuntimeParams
	setDefault := func(name, value string) {
		if _, set := params[name]; !set {
			params[name] = value
		}
	}
	setDefault("application_name", "inventory-"+purpose)
	// A statement or a lock wait that runs away is cut off rather than
	// holding its connection (and maybe a balance row) indefinitely.
	setDefault("statement_timeout", strconv.FormatInt(cfg.DBStatementTimeout.Milliseconds(), 10))
	setDefault("lock_timeout", strconv.FormatInt(cfg.DBLockTimeout.Milliseconds(), 10))
	// JIT compilation pays off for long analytic queries; ours take
	// microseconds, and a statement whose estimate crosses jit_above_cost
	// (the relay's, whose scans are forced onto indexes, did) spent 100-160 ms
	// compiling on every run.
	setDefault("jit", "off")
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	return pool, nil
}
