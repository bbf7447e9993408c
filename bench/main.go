// Command bench measures the server end to end, as clients see it, next to
// what PostgreSQL alone does with the same statements: `make bench` (full,
// about 12 minutes) and `make bench-smoke` (every scenario for a second,
// for CI). It creates its own database, runs the real server binary on a
// loopback port, and for each client count runs a pgbench baseline cell
// and then our cells over HTTP/GraphQL, interleaved, so both see the same
// machine state; the availability rows also run after a ceiling cell, a
// minimal net/http handler answering the same request from a map
// (ceiling.go), and the write rows after a naive server's cell, what a team
// writes from the seeds in an afternoon (naive.go), with the CPU each side
// used per 1,000 holds. Then the subscriber rows (fanout.go, fanout_rows.go), an
// "under attack" row and an expiry storm. It prints a
// markdown table and writes it with an SVG chart to bench/results/.
//
// Performance numbers never fail the run; a failed correctness check
// (balances out of range, reconciliation not empty, a hold expired twice)
// makes it exit 1.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// options are the command-line flags.
type options struct {
	bin        string
	out        string
	cellDur    time.Duration
	clients    []int
	stormHolds int
	// the waitlist row: clients, entries in the line, entries one receipt offers
	waitlistClients, waitlistEntries, waitlistDrain int
	stormWait                                       time.Duration
	subscribers                                     int // stockChanged subscribers in each fan-out row
	fanClients                                      int // clients reserving during the stockChanged fan-out rows
	viewers                                         int // availabilityChanged subscribers on the hot SKU
	viewClients                                     int // clients reserving the hot SKU meanwhile
	maxConns                                        int
	codesRate                                       int
	smoke                                           bool
	soak                                            bool          // bench/soak.go instead of the benchmark
	soakDur                                         time.Duration // how long the soak's load runs
	pprofAddr                                       string        // INVENTORY_PPROF_ADDR of the server, "" for none
	// the scale-out row (scaleout.go): its topology's directory and first
	// port (0: derived from the directory), and its client counts
	clusterDir   string
	clusterPort  int
	scaleClients []int
	// PgBouncer's server connections in all (INVENTORY_CLUSTER_SERVER_CONNS)
	scaleServerConns int
	// scaleAltBin, if set, is the server binary of the multi-instance
	// cells: an A/B of a change meant for several instances, in one run
	scaleAltBin string
	// tracingBaseBin, if set, adds a third instance to the tracing row:
	// this binary, tracing off (the binary from before tracing: an A/B of
	// what tracing off costs, in one run)
	tracingBaseBin string
	// only, when not empty, names the scenarios (keys, "fanout", "viewers", "attack", "storm", "scaleout")
	// to run; baselines run only for the scenarios kept.
	only map[string]bool
}

// wants says whether the run includes scenario key.
func (o options) wants(key string) bool { return len(o.only) == 0 || o.only[key] }

// bench is the state shared by every scenario of one run.
type bench struct {
	opts       options
	pool       *pgxpool.Pool // the bench's own connections to its database, for seeding and checks
	dbURL      string
	srv        *serverProc
	gql        *gqlClient
	cat        catalog
	adminKey   string
	serviceKey string
	shoppers   *shoppers    // checkouts and their tokens, per client
	ceiling    *ceilingProc // the availability rows' second baseline, when they run
	naive      *naiveProc   // the write rows' second baseline, when they run
	naiveCat   naiveCatalog // the naive server's SKUs
	// postmaster is the bench database's PostgreSQL, whose CPU the write
	// rows measure; 0 when it is not on this machine
	postmaster int
	sqlDir     string
	// env is the server's environment (secrets included), for a second
	// instance of it (the tracing row)
	env []string
}

var started = time.Now()

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench %6.1fs: %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
}

func main() {
	var o options
	var clients string
	flag.StringVar(&o.bin, "bin", "bin/inventory", "the server binary (go build -o bin/inventory .)")
	flag.StringVar(&o.out, "out", "bench/results", "directory for the table and chart")
	flag.DurationVar(&o.cellDur, "duration", 8*time.Second, "how long each cell runs")
	flag.StringVar(&clients, "clients", "1,8,32,64", "client counts, comma-separated")
	flag.IntVar(&o.stormHolds, "storm", 50_000, "holds in the expiry storm")
	flag.IntVar(&o.waitlistEntries, "waitlist-entries", 10_000, "entries waiting in front of the waitlist row's hot SKU")
	flag.IntVar(&o.waitlistDrain, "waitlist-drain", 10_000, "single-unit entries one receipt offers in the waitlist row")
	flag.IntVar(&o.waitlistClients, "waitlist-clients", 32, "clients of the waitlist row")
	flag.DurationVar(&o.stormWait, "storm-wait", time.Minute, "how long after the storm's deadline to wait for every hold to be released")
	flag.IntVar(&o.subscribers, "subscribers", 1000, "stockChanged subscribers in each fan-out row (unfiltered, and filtered to one SKU each)")
	flag.IntVar(&o.fanClients, "fanout-clients", 8, "clients reserving during the stockChanged fan-out rows")
	flag.IntVar(&o.viewers, "viewers", 10_000, "availabilityChanged subscribers on one hot SKU in the viewers row")
	flag.IntVar(&o.viewClients, "viewer-clients", 32, "clients reserving the hot SKU during the viewers row")
	flag.IntVar(&o.maxConns, "max-conns", 40, "INVENTORY_DB_MAX_CONNS for the server")
	flag.IntVar(&o.codesRate, "codes-rate", 5000, "CODES reserves/s to stock codes for (a generous cap)")
	flag.BoolVar(&o.smoke, "smoke", false, "tiny sizes, about a second per cell: clients 1,4, 300 holds, 20 subscribers and 20 viewers, 4 clients reserving under them")
	flag.BoolVar(&o.soak, "soak", false, "instead of the benchmark, a soak: mixed load for -soak-duration, the server's RSS and goroutines sampled every 5 s must stay flat (make soak)")
	flag.DurationVar(&o.soakDur, "soak-duration", 10*time.Minute, "how long the -soak load runs")
	flag.StringVar(&o.pprofAddr, "pprof", "", "serve the server's profiler on this loopback address (e.g. 127.0.0.1:6061) for go tool pprof during the run")
	flag.StringVar(&o.clusterDir, "cluster-dir", ".data/cluster-bench", "the scale-out row's topology (scripts/cluster.sh db: primary, standby, PgBouncer) lives here; the data stays for the next run")
	flag.IntVar(&o.clusterPort, "cluster-port", 0, "the first of the scale-out topology's ports (0: derived from -cluster-dir, in 31900..31995)")
	flag.IntVar(&o.scaleServerConns, "scaleout-server-conns", scaleServerConns, "PgBouncer's server connections in all, in the scale-out row")
	flag.StringVar(&o.scaleAltBin, "scaleout-alt-bin", "", "run the scale-out row's three-instance cells with this server binary (an A/B of a change for several instances, against -bin's one instance in the same run)")
	flag.StringVar(&o.tracingBaseBin, "tracing-base-bin", "", "add to the tracing row cells against this server binary, tracing off (e.g. a build from before tracing), run just before each pair")
	scaleClients := flag.String("scaleout-clients", "64", "client counts of the scale-out row, comma-separated")
	var only string
	flag.StringVar(&only, "only", "", "run only these, comma-separated: scenario keys ("+scenarioKeys()+"), fanout (both stockChanged rows), viewers (availabilityChanged), attack, tracing (off and on, side by side), waitlist, storm, scaleout (direct against PgBouncer, own topology); baselines only for them")
	ceilingServe := flag.Bool("ceiling-serve", false, "internal: be the ceiling handler the availability rows are compared with (ceiling.go)")
	naiveServe := flag.Bool("naive-serve", false, "internal: be the naive server the write rows are compared with (naive.go)")
	flag.Parse()
	for role, on := range map[string]bool{"-ceiling-serve": *ceilingServe, "-naive-serve": *naiveServe} {
		if on {
			if err := childRoles[role](); err != nil {
				fmt.Fprintln(os.Stderr, "bench:", err)
				os.Exit(1)
			}
			return
		}
	}
	for f := range strings.SplitSeq(only, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if !strings.Contains(","+scenarioKeys()+",fanout,viewers,attack,tracing,waitlist,storm,scaleout,", ","+f+",") {
			fmt.Fprintf(os.Stderr, "bench: -only: unknown scenario %q (known: %s, fanout, viewers, attack, tracing, waitlist, storm, scaleout)\n", f, scenarioKeys())
			os.Exit(2)
		}
		if o.only == nil {
			o.only = map[string]bool{}
		}
		o.only[f] = true
	}
	if o.smoke {
		o.cellDur, clients, o.stormHolds, o.subscribers, o.stormWait = time.Second, "1,4", 300, 20, 30*time.Second
		o.waitlistEntries, o.waitlistDrain, o.waitlistClients = 200, 200, 4
		o.fanClients, o.viewers, o.viewClients = 4, 20, 4
		*scaleClients = "4"
	}
	for name, n := range map[string]int{"-subscribers": o.subscribers, "-fanout-clients": o.fanClients, "-viewers": o.viewers, "-viewer-clients": o.viewClients} {
		if n < 1 {
			fmt.Fprintf(os.Stderr, "bench: %s must be at least 1, got %d\n", name, n)
			os.Exit(2)
		}
	}
	o.clients = clientCounts("-clients", clients)
	o.scaleClients = clientCounts("-scaleout-clients", *scaleClients)
	// The load generator shares two cores with the server and PostgreSQL:
	// trade memory for fewer garbage collections.
	debug.SetGCPercent(400)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	runner := run
	if o.soak {
		runner = runSoak
	}
	failed, err := runner(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if failed {
		fmt.Fprintln(os.Stderr, "bench: a correctness check failed (see the check column, or the soak's verdict)")
		os.Exit(1)
	}
}

// clientCounts parses a comma-separated list of client counts, or exits.
func clientCounts(flagName, list string) []int {
	var out []int
	for f := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: bad %s %q\n", flagName, list)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}

// run does the whole benchmark; it reports whether a correctness check
// failed, and an error when the bench itself could not run.
func run(ctx context.Context, o options) (failed bool, err error) {
	rep := &report{started: started, cellDur: o.cellDur}
	if len(o.only) == 1 && o.only["scaleout"] {
		// The row brings its own topology: nothing of the bench database's.
		scaleoutRow(ctx, o, rep)
		return rep.write(ctx, o)
	}
	maxClients := max(o.fanClients, o.viewClients) // the subscriber rows reserve as shoppers too
	for _, c := range o.clients {
		maxClients = max(maxClients, c)
	}
	b, cleanup, err := setUp(ctx, o, "bench", max(maxClients, 32)+8, max(maxClients, 32))
	if err != nil {
		return false, err
	}
	defer cleanup()
	// Enough baseline codes that SKIP LOCKED never runs dry within a cell
	// (they are returned after each one).
	if err := seedPgbenchCodes(ctx, b.pool, &b.cat, max(1000, int(o.cellDur.Seconds()*20_000))); err != nil {
		return false, err
	}
	if err := writeSQLFiles(b.sqlDir); err != nil {
		return false, err
	}

	if err := b.waitStartupReconcile(ctx); err != nil {
		return false, err
	}
	if baselineWanted(o, "ceiling-post") || baselineWanted(o, "ceiling-get") {
		if b.ceiling, err = b.startCeiling(ctx, max(maxClients, 32)+8); err != nil {
			return false, err
		}
		defer b.ceiling.stop()
	}
	if b.ceiling != nil && b.ceiling.mismatch != "" {
		rep.notes = append(rep.notes, "ceiling: not like for like: "+b.ceiling.mismatch)
	}
	if naiveWanted(o) {
		// Seeded after our server started, like pgbench's codes: the
		// start-up key check would refuse the dummy codes.
		st := naiveStock{spread: spreadSKUs, spreadOnHand: spreadOnHand, hotOnHand: hotOnHand, codes: codesStock(o)}
		if b.naiveCat, err = seedNaive(ctx, b.pool, b.cat.loc, st); err != nil {
			return false, err
		}
		if b.naive, err = b.startNaive(max(maxClients, 32) + 8); err != nil {
			return false, err
		}
		defer b.naive.stop()
	}
	if b.postmaster, err = findPostmaster(ctx, b.pool); err != nil {
		return false, err
	}
	if b.postmaster == 0 {
		rep.notes = append(rep.notes, "PostgreSQL is not on this machine (or not readable in /proc): no CPU per 1,000 holds")
	}
	if err := b.runCells(ctx, rep); err != nil {
		return false, err
	}
	// Before the extras: the storm last of all, and the scale-out row on a
	// PostgreSQL of its own while the bench database's server idles.
	if o.wants("scaleout") {
		scaleoutRow(ctx, o, rep)
	}
	b.runExtras(ctx, rep)
	return rep.write(ctx, o)
}

// scaleoutRow runs the scale-out row into rep; a failure to run it is a
// FAIL note.
func scaleoutRow(ctx context.Context, o options, rep *report) {
	res, err := runScaleout(ctx, o, o.scaleClients)
	if res != nil && len(res.cells) > 0 {
		rep.scaleout = res
	}
	if err != nil && ctx.Err() == nil {
		rep.notes = append(rep.notes, "FAIL: scale-out: "+err.Error())
	}
}

// write prints the report, writes it to o.out and says whether a
// correctness check failed.
func (rep *report) write(ctx context.Context, o options) (failed bool, err error) {
	md := rep.markdown()
	fmt.Println(md)
	stamp := started.Format("20060102-150405")
	for name, body := range map[string]string{"bench-" + stamp + ".md": md, "bench-" + stamp + ".svg": rep.svg(), "latest.md": md, "latest.svg": rep.svg()} {
		if err := os.WriteFile(filepath.Join(o.out, name), []byte(body), 0o644); err != nil {
			return false, fmt.Errorf("write results: %w", err)
		}
	}
	logf("wrote %s/bench-%s.{md,svg} (and latest.*)", o.out, stamp)
	for _, r := range rep.rows {
		failed = failed || (!r.baseline && r.check != "ok")
	}
	if rep.storm != nil && rep.storm.problem != "" {
		failed = true
	}
	if rep.waitlist != nil && rep.waitlist.problem != "" {
		failed = true
	}
	if rep.scaleout != nil {
		for _, c := range rep.scaleout.cells {
			failed = failed || c.check != "ok"
		}
	}
	for _, n := range rep.notes {
		failed = failed || strings.HasPrefix(n, "FAIL")
	}
	return failed, ctx.Err()
}

// codesStock is how many codes our CODES SKU gets, and the naive server's
// too: enough for every CODES cell at codesRate reserves/s.
func codesStock(o options) int {
	return max(200, int(float64(len(o.clients))*o.cellDur.Seconds()*float64(o.codesRate)))
}

// importCodes stocks our CODES SKU through the real CLI import with
// codesStock codes.
func (b *bench) importCodes(ctx context.Context, env []string, dir string) error {
	n := codesStock(b.opts)
	path := filepath.Join(dir, "codes.txt")
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("codes file: %w", err)
	}
	buf := make([]byte, 0, 1<<16)
	for i := range n {
		buf = fmt.Appendf(buf, "BENCH-%08d-%x\n", i, uint32(i*2654435761))
		if len(buf) > 60_000 {
			if _, err := f.Write(buf); err != nil {
				f.Close()
				return fmt.Errorf("codes file: %w", err)
			}
			buf = buf[:0]
		}
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return fmt.Errorf("codes file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("codes file: %w", err)
	}
	t0 := time.Now()
	out, err := cli(ctx, b.opts.bin, env, "import", "--sku", b.cat.codesSKU, "--location", b.cat.locCode, "--batch", "bench", path)
	if err != nil {
		return err
	}
	logf("imported %d codes in %s: %s", n, time.Since(t0).Round(time.Millisecond), strings.TrimSpace(out))
	return nil
}

// waitStartupReconcile waits for the reconciliation job the server runs at
// start-up: pgbench's claims write no ledger rows, so a reconciliation that
// overlapped a baseline cell would log mismatches that are the bench's doing.
// Later runs are an hour away (INVENTORY_RECONCILE_INTERVAL).
func (b *bench) waitStartupReconcile(ctx context.Context) error {
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var done bool
		if err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM river_job WHERE kind = 'reconcile' AND state = 'completed')`).Scan(&done); err != nil {
			return fmt.Errorf("startup reconciliation: %w", err)
		}
		if done {
			return nil
		}
	}
	logf("the start-up reconciliation job has not completed within 60s; going on")
	return nil
}

// scenarioKeys lists the scenario keys, for -only.
func scenarioKeys() string {
	keys := make([]string, len(scenarios))
	for i, sc := range scenarios {
		keys[i] = sc.key
	}
	return strings.Join(keys, ",")
}

// runExtras runs the "under attack" row, the subscriber fan-out and then
// the expiry storm after the cells (the storm last, so a backlog of expiry jobs it may leave behind
// does not load any other measurement); their failures are recorded in the
// report rather than aborting it.
func (b *bench) runExtras(ctx context.Context, rep *report) {
	// The storm creates its holds at the client count where the service-key
	// reserve was fastest; that rate sizes how far ahead the deadline is.
	rate, stormClients := 0.0, b.opts.clients[0]
	for _, r := range rep.rows {
		if r.key == "spread-service" && r.res.opsPerSec() >= rate {
			rate, stormClients = r.res.opsPerSec(), r.clients
		}
	}
	// The attack row runs first: its RSS is the attack's own. After the
	// 10,000 viewers the server still holds their memory (the row read
	// 644 MB there, 72 MB alone).
	if ctx.Err() == nil && b.opts.wants("attack") {
		b.runAttackRow(ctx, rep)
	}
	for i, spec := range b.fanoutSpecs(ctx, rep) {
		if ctx.Err() != nil {
			return
		}
		logf("fan-out: %s: %d subscribers, %d clients reserving", spec.name, spec.subscribers, spec.clients)
		f, err := b.runFanout(ctx, spec, b.opts.cellDur, 100_000+10*i)
		if err != nil {
			rep.notes = append(rep.notes, "FAIL: fan-out ("+spec.name+"): "+err.Error())
			continue
		}
		rep.fanouts = append(rep.fanouts, f)
		if spec.rssMB == 0 { // a row with its own RSS target is judged by it
			rep.peakRSS = max(rep.peakRSS, f.rssMB)
		}
		if problem, err := b.checkInvariants(ctx); err != nil || problem != "" {
			rep.notes = append(rep.notes, "FAIL: after fan-out ("+spec.name+"): "+problem+errString(err))
		}
		logf("fan-out: %d attached, %.0f reserves/s (without %.0f: %.2f), %d events, p50 %.0f ms p99 %.0f ms, %d dropped, RSS %.0f MB",
			f.attached, f.load.opsPerSec(), f.without.opsPerSec(), f.ratio(), f.events, f.lat.quantile(0.5), f.lat.quantile(0.99), f.dropped, f.rssMB)
	}
	if ctx.Err() == nil && b.opts.wants("tracing") {
		logf("tracing: reserves against this server (off) and a second instance tracing every request")
		t, err := runTracing(ctx, b.opts, b.opts.clients)
		if err != nil {
			rep.notes = append(rep.notes, "FAIL: tracing: "+err.Error())
		}
		if len(t.cells) > 0 {
			rep.tracing = &t
		}
	}
	if ctx.Err() == nil && b.opts.wants("waitlist") {
		w, err := b.runWaitlist(ctx, b.opts.waitlistClients, b.opts.waitlistEntries, b.opts.waitlistDrain)
		if err != nil {
			rep.notes = append(rep.notes, "FAIL: waitlist: "+err.Error())
		} else {
			if problem, err := b.checkInvariants(ctx); err != nil || problem != "" {
				w.problem = strings.TrimPrefix(strings.Join([]string{w.problem, problem, errString(err)}, "; "), "; ")
			}
			rep.waitlist = &w
		}
	}
	if ctx.Err() != nil || !b.opts.wants("storm") {
		return
	}
	s, err := b.runStorm(ctx, b.opts.stormHolds, stormClients, rate, b.opts.stormWait)
	if err != nil {
		rep.notes = append(rep.notes, "FAIL: expiry storm: "+err.Error())
		return
	}
	if problem, err := b.checkInvariants(ctx); err != nil || problem != "" {
		s.problem = strings.TrimPrefix(strings.Join([]string{s.problem, problem, errString(err)}, "; "), "; ")
	}
	rep.storm = &s
	rep.peakRSS = max(rep.peakRSS, s.rssMB)
	released := "not all within " + s.waited.String()
	if s.releasedAfter >= 0 {
		released = "all released " + s.releasedAfter.Round(time.Millisecond).String()
	}
	logf("storm: %s after the last deadline; %d expired, %d still held (%s); lag p50 %.0f ms p99 %.0f ms; problem %q",
		released, s.expired, s.stillHeld, s.endedBy, s.lagP50, s.lagP99, s.problem)
}

// runAttackRow runs the "under attack" row and records it in rep.
func (b *bench) runAttackRow(ctx context.Context, rep *report) {
	logf("under attack: a checkout reserving alone, then with %d anonymous clients", attackers)
	a, err := b.runAttack(ctx, b.opts.cellDur)
	if err != nil {
		rep.notes = append(rep.notes, "FAIL: under attack: "+err.Error())
		return
	}
	rep.attack = &a
	rep.peakRSS = max(rep.peakRSS, a.rssMB)
	if problem, err := b.checkInvariants(ctx); err != nil || problem != "" {
		rep.notes = append(rep.notes, "FAIL: after the attack: "+problem+errString(err))
	}
	if a.attacked.failed > 0 {
		logf("  reserves failed under attack: %d, first: %v", a.attacked.failed, a.attacked.firstErr)
	}
	logf("under attack (%s): reserve alone p50 %.1f ms p99 %.1f ms; attacked p50 %.1f ms p99 %.1f ms; %.1f anonymous answers/s (%d failed, first: %v); RSS %.0f MB",
		a.doc, a.alone.lat.quantile(0.5), a.alone.lat.quantile(0.99), a.attacked.lat.quantile(0.5), a.attacked.lat.quantile(0.99),
		a.anon.opsPerSec(), a.anon.failed, a.anon.firstErr, a.rssMB)
}

// dbName is the database part of a connection URL, for progress lines.
func dbName(u string) string {
	name := u[strings.LastIndex(u, "/")+1:]
	if i := strings.IndexByte(name, '?'); i >= 0 {
		name = name[:i]
	}
	return name
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
