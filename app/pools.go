package app

import (
	"context"
	"fmt"
	"inventory/config"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pools are the server's connections to PostgreSQL, one pool per kind of
// work, so that no kind can starve another: requests queued on a hot
// balance can take every request connection, and expiry jobs and the event
// relay still run on theirs, so holds expire on time and live stock stays
// live exactly during a flash sale.
//
// Every pool on DATABASE_URL works through a transaction pooler: no state
// outlives a transaction (advisory locks are transaction-scoped, settings
// are SET LOCAL, temporary tables ON COMMIT DROP). What needs a session is
// on DATABASE_DIRECT_URL: migrations, river and listen.
type pools struct {
	api    *pgxpool.Pool // HTTP requests and subscriptions' reads (INVENTORY_DB_MAX_CONNS)
	jobs   *pgxpool.Pool // the jobs' own work: expiry, sweeper, reconciliation (INVENTORY_DB_JOB_CONNS)
	events *pgxpool.Pool // the event relay and catch-up reads (INVENTORY_DB_EVENT_CONNS)
	// river is River's client: fetching, completing, leader election and
	// its LISTEN. It is jobs itself unless DATABASE_DIRECT_URL is set; then
	// a small pool of its own there (INVENTORY_DB_DIRECT_CONNS).
	river *pgxpool.Pool
	// listen is how the event broker opens its LISTEN connection: on the
	// direct URL.
	listen *pgx.ConnConfig
	// replica is the streaming standby for storefront reads, nil without
	// DATABASE_REPLICA_URL. It is not pinged at start: a standby that is
	// down must not keep the server from serving (the primary answers).
	replica *pgxpool.Pool
}

// openPools opens the pools, closing what it opened if one fails.
func openPools(ctx context.Context, cfg config.Config, tracer pgx.QueryTracer) (*pools, error) {
	p := &pools{}
	var err error
	fail := func(err error) (*pools, error) {
		p.close()
		return nil, err
	}
	pooled := connection{url: cfg.DatabaseURL, name: "DATABASE_URL", transactionPooled: cfg.DBPooler == "transaction"}
	if p.api, err = openPool(ctx, cfg, pooled, "api", cfg.DBMaxConns, tracer); err != nil {
		return fail(err)
	}
	if p.jobs, err = openPool(ctx, cfg, pooled, "jobs", cfg.DBJobConns, tracer); err != nil {
		return fail(err)
	}
	if p.events, err = openPool(ctx, cfg, pooled, "events", cfg.DBEventConns, tracer); err != nil {
		return fail(err)
	}
	direct := directConnection(cfg)
	p.river = p.jobs
	if cfg.DatabaseDirectURL != "" {
		if p.river, err = openPool(ctx, cfg, direct, "river", cfg.DBDirectConns, tracer); err != nil {
			return fail(err)
		}
	}
	listen, err := poolConfig(cfg, direct, "listen", 1)
	if err != nil {
		return fail(err)
	}
	p.listen = listen.ConnConfig
	if cfg.DatabaseReplicaURL != "" {
		rcfg, err := poolConfig(cfg, connection{url: cfg.DatabaseReplicaURL, name: "DATABASE_REPLICA_URL"}, "replica", cfg.DBReplicaConns)
		if err != nil {
			return fail(err)
		}
		rcfg.ConnConfig.Tracer = tracer
		if p.replica, err = pgxpool.NewWithConfig(ctx, rcfg); err != nil {
			return fail(fmt.Errorf("DATABASE_REPLICA_URL: %w", err))
		}
	}
	if pooled.transactionPooled {
		if err := checkRoleTimeouts(ctx, p.api); err != nil {
			return fail(err)
		}
	}
	return p, nil
}

// all lists each pool once, named as in metrics.
func (p *pools) all() map[string]*pgxpool.Pool {
	m := map[string]*pgxpool.Pool{"api": p.api, "jobs": p.jobs, "events": p.events}
	if p.river != p.jobs {
		m["river"] = p.river
	}
	if p.replica != nil {
		m["replica"] = p.replica
	}
	return m
}

func (p *pools) close() {
	for _, pool := range []*pgxpool.Pool{p.api, p.jobs, p.events} {
		if pool != nil {
			pool.Close()
		}
	}
	if p.river != nil && p.river != p.jobs {
		p.river.Close()
	}
	if p.replica != nil {
		p.replica.Close()
	}
}

// connection is one of the URLs the server connects to.
type connection struct {
	url  string
	name string // the setting, for errors
	// transactionPooled: a pooler (PgBouncer in transaction mode) hands the
	// server connection to another client after each transaction.
	transactionPooled bool
}

// directConnection is the connection for what needs a session.
func directConnection(c config.Config) connection {
	if c.DatabaseDirectURL == "" {
		return connection{url: c.DatabaseURL, name: "DATABASE_URL", transactionPooled: c.DBPooler == "transaction"}
	}
	return connection{url: c.DatabaseDirectURL, name: "DATABASE_DIRECT_URL"}
}

// openPool opens one pool of size connections, named purpose in
// pg_stat_activity (application_name inventory-<purpose>; through a
// transaction pooler every one is "inventory", see poolConfig), with the server's
// session settings; tracer, when tracing is on, makes a span of each
// statement and each wait for a connection.
func openPool(ctx context.Context, cfg config.Config, conn connection, purpose string, size int32, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	pcfg, err := poolConfig(cfg, conn, purpose, size)
	if err != nil {
		return nil, err
	}
	pcfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database (%s): %w", conn.name, err)
	}
	return pool, nil
}

func poolConfig(cfg config.Config, conn connection, purpose string, size int32) (*pgxpool.Config, error) {
	pcfg, err := pgxpool.ParseConfig(conn.url)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", conn.name, err)
	}
	pcfg.MaxConns = size
	params := pcfg.ConnConfig.RuntimeParams
	setDefault := func(name, value string) {
		if _, set := params[name]; !set {
			params[name] = value
		}
	}
	if conn.transactionPooled {
		// PgBouncer keeps application_name per client and, when the server
		// connection it lends last served another name, sends a SET first:
		// one name per pool would make that two extra statements (and a
		// transaction) whenever a server connection passes from one pool's
		// client to another's. So every pooled connection, of every
		// instance, is "inventory".
		setDefault("application_name", "inventory")
		// A named prepared statement lives on one server connection; the
		// next transaction may get another (PgBouncer < 1.21 does not
		// track them). Descriptions are cached on our side instead, so a
		// query is still one round trip. Startup parameters other than a
		// few are refused by PgBouncer: the timeouts are role defaults.
		pcfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		return pcfg, nil
	}
	setDefault("application_name", "inventory-"+purpose)
	// A statement or a lock wait that runs away is cut off rather than
	// holding its connection (and maybe a balance row) indefinitely.
	setDefault("statement_timeout", strconv.FormatInt(cfg.DBStatementTimeout.Milliseconds(), 10))
	setDefault("lock_timeout", strconv.FormatInt(cfg.DBLockTimeout.Milliseconds(), 10))
	// JIT compilation pays off for long analytic queries; ours take
	// microseconds, and a statement whose estimate crosses jit_above_cost
	// (the relay's, whose scans are forced onto indexes, does) spends far
	// longer compiling than running, on every run.
	setDefault("jit", "off")
	return pcfg, nil
}

// checkRoleTimeouts refuses a transaction-pooled connection whose sessions
// would run without a statement or lock timeout: the server cannot set them
// itself there (no startup parameters, and a SET would stay on a server
// connection other clients get next), so they must be the role's defaults.
func checkRoleTimeouts(ctx context.Context, pool *pgxpool.Pool) error {
	var statement, lock, jit string
	err := pool.QueryRow(ctx, `SELECT current_setting('statement_timeout'), current_setting('lock_timeout'), current_setting('jit')`).Scan(&statement, &lock, &jit)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: read the role's timeouts: %w", err)
	}
	if statement == "0" || lock == "0" {
		return fmt.Errorf("INVENTORY_DB_POOLER=transaction: the role's statement_timeout is %q and lock_timeout %q; through a transaction pooler the server cannot set them, so make them the role's defaults on the primary: ALTER ROLE <role> SET statement_timeout = '30s'; ALTER ROLE <role> SET lock_timeout = '10s'; ALTER ROLE <role> SET jit = off", statement, lock)
	}
	return nil
}
