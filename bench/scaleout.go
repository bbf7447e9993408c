package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The scale-out row (issue 19): the spread reserve at scaleClients clients
// against one instance connected straight to the primary, then against one
// and three instances through PgBouncer in transaction mode (at most
// scaleServerConns server connections in all) with a streaming standby for
// storefront reads, clients round-robin over the instances. The topology is
// scripts/cluster.sh's (make cluster's), started in a directory of the
// bench's own and stopped at the end; the instances run only during their
// cell, so each cell's connections and CPU are its own.

// idleSpan is how long a cell's instances are watched idle before the load.
const idleSpan = 3 * time.Second

// scaleServerConns is PgBouncer's server pool in the row by default
// (-scaleout-server-conns): the bound.
const scaleServerConns = 20

// scaleCell is one measured cell of the row.
type scaleCell struct {
	name      string
	instances int
	pooled    bool // through PgBouncer (with the standby for reads)
	// reference: one instance direct to the primary, today's deployment,
	// which the others are compared with; run first and again last
	reference bool
	clients   int
	res       loadResult
	// server connections on the primary to the bench database, peaks over
	// the cell: lent by PgBouncer, and held by the instances themselves
	pooledConns, directConns int
	directByApp              string
	clWaiting                int // PgBouncer's cl_waiting, peak
	replayLag, metricLag     histogram
	// CPU seconds over the cell
	primaryCPU, standbyCPU, instancesCPU, bouncerCPU float64
	standbyReads, primaryReads                       int64 // inventory_replica_reads_total, summed over the instances
	// what bounds it: PostgreSQL commits per hold, the reserve batches'
	// mean size (inventory_reserve_batch_requests_total / _batches_total),
	// and the active backends' wait events
	commitsPerHold, batchSize float64
	batchedShare              float64 // requests taken into batches ÷ holds
	batchFailures             int64   // batches that failed whole (their requests then ran one by one)
	waits                     string
	// the instances idle, before the load: PostgreSQL commits a second
	// and primary cores their background work (event relay, replica
	// monitor, River) costs
	idleCommits, idlePrimaryCores float64
	check                         string
}

// holdsPerCore is ops/s over the cores cpu seconds kept busy in the cell.
func (c scaleCell) holdsPerCore(cpu float64) float64 {
	if cpu <= 0 {
		return 0
	}
	return float64(c.res.ok) / cpu
}

// scaleResult is the row: its cells, per client count the direct one first.
type scaleResult struct {
	cells      []scaleCell
	altBin     string // the three-instance cells' binary, if not -bin's
	serverConn int
	cellDur    time.Duration
}

// direct is the reference throughput at clients: the mean of the
// reference cells, run first and last so that the machine drifting over
// the row (autovacuum on the seeded tables, other work) weighs on both ends
// alike. false when there is none.
func (r *scaleResult) direct(clients int) (float64, bool) {
	sum, n := 0.0, 0
	for _, c := range r.cells {
		if c.reference && c.clients == clients {
			sum, n = sum+c.res.opsPerSec(), n+1
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// ratio is the cell's ops/s over the reference at the same client count.
func (r *scaleResult) ratio(c scaleCell) float64 {
	d, ok := r.direct(c.clients)
	if !ok || d <= 0 {
		return 0
	}
	return c.res.opsPerSec() / d
}

// cluster is what scripts/cluster.sh db printed.
type cluster struct {
	primaryURL, pooledURL, replicaURL string
	bouncerPid                        int
	primaryDir, standbyDir            string
	dir                               string
	env                               []string
}

// clusterPort is the first of the bench cluster's five ports: -cluster-port,
// else one derived from the directory, so the same directory keeps the ports
// its postgresql.conf was written with. They are below Linux's ephemeral
// range (32768..60999, where pgup.sh's and cluster.sh's own defaults are):
// there a client socket of anyone's, even one in TIME_WAIT, can hold the
// port at the moment the postmaster binds it, which happened here under a
// busy test suite.
func clusterPort(o options, dir string) int {
	if o.clusterPort > 0 {
		return o.clusterPort
	}
	return 31900 + int(crc32.ChecksumIEEE([]byte(dir))%20)*5
}

// startCluster runs scripts/cluster.sh db for the bench's own directory.
func startCluster(ctx context.Context, o options) (*cluster, error) {
	dir, err := filepath.Abs(o.clusterDir)
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir}
	c.env = append(os.Environ(),
		"INVENTORY_CLUSTER_DIR="+dir,
		"INVENTORY_CLUSTER_PORT="+strconv.Itoa(clusterPort(o, dir)),
		"INVENTORY_CLUSTER_SERVER_CONNS="+strconv.Itoa(o.scaleServerConns))
	// The ports are in Linux's ephemeral range (32768..60999): a client
	// socket of anyone's may hold one for a moment (the postmaster then
	// cannot bind it), so a failed start is tried again.
	var out, errb bytes.Buffer
	for attempt := 1; ; attempt++ {
		out.Reset()
		errb.Reset()
		cmd := exec.CommandContext(ctx, "scripts/cluster.sh", "db")
		cmd.Env = c.env
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err == nil {
			break
		}
		if attempt == 5 || ctx.Err() != nil {
			return nil, fmt.Errorf("scripts/cluster.sh db: %w: %s", err, strings.TrimSpace(errb.String()))
		}
		logf("scale-out: scripts/cluster.sh db failed (%v), again in 2s: %s", err, strings.TrimSpace(errb.String()))
		time.Sleep(2 * time.Second)
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch k {
		case "INVENTORY_CLUSTER_PRIMARY_URL":
			c.primaryURL = v
		case "INVENTORY_CLUSTER_POOLED_URL":
			c.pooledURL = v
		case "INVENTORY_CLUSTER_REPLICA_URL":
			c.replicaURL = v
		case "INVENTORY_CLUSTER_BOUNCER_PID":
			c.bouncerPid, _ = strconv.Atoi(v)
		case "INVENTORY_CLUSTER_STANDBY_DIR":
			c.standbyDir = v
			c.primaryDir = filepath.Join(filepath.Dir(v), "primary")
		}
	}
	if c.primaryURL == "" || c.pooledURL == "" || c.replicaURL == "" || c.standbyDir == "" {
		c.stop()
		return nil, fmt.Errorf("scripts/cluster.sh db printed no URLs: %q", out.String())
	}
	return c, nil
}

// stop runs scripts/cluster.sh stop (the data stays for the next run).
func (c *cluster) stop() {
	cmd := exec.Command("scripts/cluster.sh", "stop")
	cmd.Env = c.env
	if out, err := cmd.CombinedOutput(); err != nil {
		logf("scale-out: scripts/cluster.sh stop: %v: %s", err, out)
	}
}

// withDB is u with database name db (and application_name app, if set).
func withDB(u, db, app string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	p.Path = "/" + db
	if app != "" {
		q := p.Query()
		q.Set("application_name", app)
		p.RawQuery = q.Encode()
	}
	return p.String()
}

// setEnv is env with each KEY=value of kvs replacing KEY's entry.
func setEnv(env []string, kvs ...string) []string {
	out := make([]string, 0, len(env)+len(kvs))
	for _, kv := range env {
		keep := true
		for _, s := range kvs {
			if k, _, _ := strings.Cut(s, "="); strings.HasPrefix(kv, k+"=") {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return append(out, kvs...)
}

// runScaleout brings the topology up, runs the row's cells at each of the
// client counts and takes the topology down. An error is the bench's (the
// row could not run); a failed check is in the cells.
func runScaleout(ctx context.Context, o options, clientCounts []int) (*scaleResult, error) {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, fmt.Errorf("results dir: %w", err)
	}
	cl, err := startCluster(ctx, o)
	if err != nil {
		return nil, err
	}
	defer cl.stop()
	logf("scale-out: primary %s, PgBouncer %s, standby %s", cl.primaryURL, cl.pooledURL, cl.replicaURL)
	dbURL, drop, err := createDatabase(ctx, cl.primaryURL)
	if err != nil {
		return nil, err
	}
	defer drop()
	dbName := dbName(dbURL)
	maxClients := 0
	for _, n := range clientCounts {
		maxClients = max(maxClients, n)
	}
	direct := serverEnv(dbURL, o.maxConns, "")
	if _, err := cli(ctx, o.bin, direct, "migrate"); err != nil {
		return nil, err
	}
	// The same secrets for every instance: a checkout token one mints the
	// others accept, as behind a load balancer.
	pooled := setEnv(direct,
		"DATABASE_URL="+withDB(cl.pooledURL, dbName, ""),
		"DATABASE_DIRECT_URL="+dbURL,
		"DATABASE_REPLICA_URL="+withDB(cl.replicaURL, dbName, ""),
		"INVENTORY_DB_POOLER=transaction")
	b := &bench{opts: o, dbURL: dbURL}
	if b.pool, err = pgxpool.New(ctx, withDB(dbURL, dbName, benchAppName)); err != nil {
		return nil, fmt.Errorf("scale-out: connect: %w", err)
	}
	defer b.pool.Close()
	if b.cat, err = seed(ctx, b.pool); err != nil {
		return nil, err
	}
	if b.adminKey, err = createKey(ctx, o.bin, direct, "admin", "scaleout-admin"); err != nil {
		return nil, err
	}
	if b.shoppers, err = newShoppers(direct, maxClients); err != nil {
		return nil, err
	}
	bcfg, err := pgx.ParseConfig(withDB(cl.pooledURL, "pgbouncer", ""))
	if err != nil {
		return nil, err
	}
	bcfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	bouncer, err := pgx.ConnectConfig(ctx, bcfg)
	if err != nil {
		return nil, fmt.Errorf("PgBouncer's admin console: %w", err)
	}
	defer bouncer.Close(context.Background())
	primaryPid, err := postmasterPid(cl.primaryDir)
	if err != nil {
		return nil, err
	}
	standbyPid, err := postmasterPid(cl.standbyDir)
	if err != nil {
		return nil, err
	}

	res := &scaleResult{serverConn: o.scaleServerConns, cellDur: o.cellDur, altBin: o.scaleAltBin}
	cellNo := 1000
	for _, clients := range clientCounts {
		for _, spec := range []struct {
			name      string
			instances int
			pooled    bool
			reference bool
		}{
			{"1 instance, direct to the primary", 1, false, true},
			// The pooler mode without the pooler: what giving up prepared
			// statements costs by itself, apart from PgBouncer's hop.
			{"1 instance direct, INVENTORY_DB_POOLER=transaction (no prepared statements)", 1, false, false},
			{"1 instance through PgBouncer", 1, true, false},
			{"3 instances through PgBouncer", 3, true, false},
			// Three instances without PgBouncer: what splitting the load
			// costs by itself (each instance coalesces only its own
			// reserves), apart from the pooler.
			{"3 instances, direct to the primary", 3, false, false},
			{"1 instance, direct to the primary (again, last)", 1, false, true},
		} {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			cellNo++
			env := direct
			if spec.pooled {
				env = pooled
			} else if strings.Contains(spec.name, "POOLER") {
				env = setEnv(direct, "DATABASE_DIRECT_URL="+dbURL, "INVENTORY_DB_POOLER=transaction")
			}
			logf("scale-out: %s, %d clients", spec.name, clients)
			cell := scaleCell{name: spec.name, instances: spec.instances, pooled: spec.pooled, reference: spec.reference, clients: clients}
			err := b.scaleCell(ctx, &cell, env, cellNo, bouncer, dbName, primaryPid, standbyPid, cl.bouncerPid)
			if err != nil {
				return res, err
			}
			logf("  %.0f ops/s, p50 %.1f ms, p99 %.1f ms, %d failed; server connections: %d via PgBouncer, %d direct (%s); cl_waiting ≤ %d; replay lag p99 %.0f ms (metric %.0f ms); CPU s: primary %.1f, instances %.1f, PgBouncer %.1f, standby %.1f; replica reads %d standby / %d primary; %.2f commits per hold, batches of %.1f (%.2f of holds batched, %d batches failed); waits: %s; idle: %.0f commits/s, %.2f primary cores; check %s",
				cell.res.opsPerSec(), cell.res.lat.quantile(0.5), cell.res.lat.quantile(0.99), cell.res.failed,
				cell.pooledConns, cell.directConns, cell.directByApp, cell.clWaiting, cell.replayLag.quantile(0.99), cell.metricLag.quantile(0.99),
				cell.primaryCPU, cell.instancesCPU, cell.bouncerCPU, cell.standbyCPU, cell.standbyReads, cell.primaryReads, cell.commitsPerHold, cell.batchSize, cell.batchedShare, cell.batchFailures, cell.waits, cell.idleCommits, cell.idlePrimaryCores, cell.check)
			if cell.res.failed > 0 {
				logf("  first failure: %v", cell.res.firstErr)
			}
			res.cells = append(res.cells, cell)
		}
	}
	return res, nil
}

// scaleCell starts the cell's instances, warms them up for a second,
// measures the reserve load with the samplers running, checks the
// invariants and stops the instances.
func (b *bench) scaleCell(ctx context.Context, cell *scaleCell, env []string, cellNo int, bouncer *pgx.Conn, dbName string, primaryPid, standbyPid, bouncerPid int) error {
	var srvs []*serverProc
	defer func() {
		for _, s := range srvs {
			if err := s.stop(); err != nil {
				logf("scale-out: %v", err)
			}
		}
	}()
	var gqls []*gqlClient
	for i := range cell.instances {
		logPath := filepath.Join(b.opts.out, fmt.Sprintf("scaleout-%d-%d.log", cellNo, i))
		bin := b.opts.bin
		if cell.instances > 1 && b.opts.scaleAltBin != "" {
			bin = b.opts.scaleAltBin
		}
		s, err := startServer(ctx, bin, env, logPath)
		if err != nil {
			return fmt.Errorf("scale-out: %w", err)
		}
		srvs = append(srvs, s)
		gqls = append(gqls, newGQLClient(s.URL, cell.clients+8))
	}
	b.srv, b.gql = srvs[0], gqls[0]
	commits := func() (n int64, err error) {
		err = b.pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
		return n, err
	}
	// Idle first: what the instances cost the primary doing nothing
	// (pg_stat_database is flushed about once a second: 3 s of it).
	time.Sleep(time.Second)
	idle0, err := commits()
	if err != nil {
		return err
	}
	pi0 := treeTicks(primaryPid)
	time.Sleep(idleSpan)
	idle1, err := commits()
	if err != nil {
		return err
	}
	cell.idleCommits = float64(idle1-idle0) / idleSpan.Seconds()
	cell.idlePrimaryCores = float64(treeTicks(primaryPid)-pi0) / ticksPerSecond / idleSpan.Seconds()
	via := func(c int) *gqlClient { return gqls[c%len(gqls)] }
	// Warm up, unmeasured: pools filled, statement descriptions cached,
	// PgBouncer's server connections open.
	warm := min(time.Second, b.opts.cellDur)
	closedLoop(ctx, cell.clients, warm, reserveVia(b, spreadSKU, true, -cellNo, cell.clients, via))

	s := &scaleSampler{primary: b.pool, dbName: dbName, bouncer: bouncer, pooled: cell.pooled}
	if cell.pooled {
		s.metrics = func(ctx context.Context) (map[string]float64, error) {
			return scrapeMetrics(ctx, srvs[0].URL, b.adminKey)
		}
	}
	instTicks := func() (t int64) {
		for _, s := range srvs {
			t += cpuTicks(s.cmd.Process.Pid, true)
		}
		return t
	}
	batches := func() (n, reqs, failed float64, err error) {
		for _, srv := range srvs {
			m, err := scrapeMetrics(ctx, srv.URL, b.adminKey)
			if err != nil {
				return 0, 0, 0, fmt.Errorf("scale-out: %w", err)
			}
			n += m["inventory_reserve_batches_total"]
			reqs += m["inventory_reserve_batch_requests_total"]
			failed += m["inventory_reserve_batch_failures_total"]
		}
		return n, reqs, failed, nil
	}
	n0, r0, f0, err := batches()
	if err != nil {
		return err
	}
	c0, err := commits()
	if err != nil {
		return err
	}
	p0, s0, i0, b0 := treeTicks(primaryPid), treeTicks(standbyPid), instTicks(), cpuTicks(bouncerPid, false)
	s.start(ctx)
	cell.res = closedLoop(ctx, cell.clients, b.opts.cellDur, reserveVia(b, spreadSKU, true, cellNo, cell.clients, via))
	sampleErr := s.done()
	p1, s1, i1, b1 := treeTicks(primaryPid), treeTicks(standbyPid), instTicks(), cpuTicks(bouncerPid, false)
	if sampleErr != nil {
		return fmt.Errorf("scale-out: sampling: %w", sampleErr)
	}
	n1, r1, f1, err := batches()
	if err != nil {
		return err
	}
	c1, err := commits()
	if err != nil {
		return err
	}
	if n1 > n0 {
		cell.batchSize = (r1 - r0) / (n1 - n0)
	}
	cell.batchFailures = int64(f1 - f0)
	if cell.res.ok > 0 {
		cell.batchedShare = (r1 - r0) / float64(cell.res.ok)
	}
	if cell.res.ok > 0 {
		// pg_stat_database lags a little (stats flush once a second at
		// most); over a cell of seconds that is noise.
		cell.commitsPerHold = float64(c1-c0) / float64(cell.res.ok)
	}
	cell.waits = topWaits(s.waits, 4)
	sec := func(d int64) float64 { return float64(d) / ticksPerSecond }
	cell.primaryCPU, cell.standbyCPU, cell.instancesCPU = sec(p1-p0), sec(s1-s0), sec(i1-i0)
	if cell.pooled {
		cell.bouncerCPU = sec(b1 - b0)
	}
	cell.pooledConns, cell.directConns, cell.directByApp, cell.clWaiting = s.peakPooled, s.peakDirectAll, directSummary(s.peakDirect), s.peakWaiting
	cell.replayLag, cell.metricLag = s.replayLag, s.metricLag
	for _, srv := range srvs {
		m, err := scrapeMetrics(ctx, srv.URL, b.adminKey)
		if err != nil {
			return fmt.Errorf("scale-out: %w", err)
		}
		cell.standbyReads += int64(m[`inventory_replica_reads_total{served_by="standby"}`])
		cell.primaryReads += int64(m[`inventory_replica_reads_total{served_by="primary"}`])
	}
	problem, err := b.checkInvariants(ctx)
	if err != nil {
		return err
	}
	cell.check = "ok"
	if problem != "" {
		cell.check = "FAIL: " + problem
	}
	return nil
}
