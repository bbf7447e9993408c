package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// connSample is one look at the primary's server connections to the bench
// database: those PgBouncer lends (their backend pids are SHOW SERVERS'
// remote_pid) and those the instances hold themselves, by application_name
// (inventory-river, inventory-listen; in the direct cell every pool).
type connSample struct {
	pooled    int
	direct    map[string]int
	walSender int
	clWaiting int            // PgBouncer clients waiting for a server connection
	waits     map[string]int // active backends on the bench database by wait event
}

// scaleSampler samples, every scaleSampleEvery while a cell runs, the
// primary's connections, PgBouncer's pools and the standby's replay lag
// (from pg_stat_replication on the primary, and from one instance's
// inventory_replica_lag_seconds).
type scaleSampler struct {
	primary *pgxpool.Pool // the bench's connections to the bench database on the primary
	bouncer *pgx.Conn     // PgBouncer's admin console
	pooled  bool          // the cell's instances connect through PgBouncer
	dbName  string
	metrics func(context.Context) (map[string]float64, error) // an instance's /metrics, nil for none

	stop chan struct{}
	wg   sync.WaitGroup

	peakPooled    int
	peakDirect    map[string]int // per application_name, the peak of each
	peakDirectAll int            // the peak of their sum
	peakWaiting   int
	walSenders    int
	replayLag     histogram      // pg_stat_replication.replay_lag (0 when the standby is caught up)
	metricLag     histogram      // inventory_replica_lag_seconds
	waits         map[string]int // active backends seen per wait event ("CPU" for none), summed over samples
	samples       int
	err           error
}

const scaleSampleEvery = 200 * time.Millisecond

// metricsEvery is how many samples there are per scrape of instance 1's
// metrics.
const metricsEvery = 5

func (s *scaleSampler) start(ctx context.Context) {
	s.stop = make(chan struct{})
	s.peakDirect = map[string]int{}
	s.waits = map[string]int{}
	s.wg.Go(func() {
		t := time.NewTicker(scaleSampleEvery)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if err := s.sample(ctx); err != nil && s.err == nil {
					s.err = err
				}
			}
		}
	})
}

// done stops sampling; it returns the first sampling error.
func (s *scaleSampler) done() error {
	close(s.stop)
	s.wg.Wait()
	return s.err
}

func (s *scaleSampler) sample(ctx context.Context) error {
	c, err := s.connections(ctx)
	if err != nil {
		return err
	}
	s.samples++
	s.peakPooled = max(s.peakPooled, c.pooled)
	sum := 0
	for app, n := range c.direct {
		s.peakDirect[app] = max(s.peakDirect[app], n)
		sum += n
	}
	s.peakDirectAll = max(s.peakDirectAll, sum)
	s.peakWaiting = max(s.peakWaiting, c.clWaiting)
	s.walSenders = max(s.walSenders, c.walSender)
	for w, n := range c.waits {
		s.waits[w] += n
	}
	var lag float64
	if err := s.primary.QueryRow(ctx, `SELECT COALESCE(max(EXTRACT(epoch FROM replay_lag)), 0)::float8 FROM pg_stat_replication`).Scan(&lag); err != nil {
		return fmt.Errorf("pg_stat_replication: %w", err)
	}
	s.replayLag.record(time.Duration(lag * float64(time.Second)))
	// A scrape costs the primary a count of the reservations (about 20 ms
	// on the bench's table): every 200 ms that was an eighth of a core
	// taken from the pooled cells only. Once a second, as a Prometheus
	// would scrape at most, is enough for the lag's p99.
	if s.metrics != nil && s.samples%metricsEvery == 1 {
		m, err := s.metrics(ctx)
		if err != nil {
			return err
		}
		if v, ok := m["inventory_replica_lag_seconds"]; ok {
			s.metricLag.record(time.Duration(v * float64(time.Second)))
		}
	}
	return nil
}

// connections counts the primary's backends now.
func (s *scaleSampler) connections(ctx context.Context) (connSample, error) {
	c := connSample{direct: map[string]int{}, waits: map[string]int{}}
	lent := map[int32]bool{}
	if s.bouncer != nil {
		servers, err := adminRows(ctx, s.bouncer, "SHOW SERVERS")
		if err != nil {
			return c, err
		}
		for _, r := range servers {
			if r["database"] == s.dbName {
				pid, _ := strconv.Atoi(r["remote_pid"])
				lent[int32(pid)] = true
			}
		}
		pools, err := adminRows(ctx, s.bouncer, "SHOW POOLS")
		if err != nil {
			return c, err
		}
		for _, r := range pools {
			if r["database"] == s.dbName {
				n, _ := strconv.Atoi(r["cl_waiting"])
				c.clWaiting += n
			}
		}
	}
	rows, err := s.primary.Query(ctx, `SELECT pid, COALESCE(backend_type, ''), COALESCE(application_name, ''), COALESCE(datname, ''),
		CASE WHEN state = 'active' THEN COALESCE(wait_event_type || ':' || wait_event, 'CPU') ELSE '' END
		FROM pg_stat_activity WHERE pid <> pg_backend_pid()`)
	if err != nil {
		return c, fmt.Errorf("pg_stat_activity: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var pid int32
		var typ, app, db, wait string
		if err := rows.Scan(&pid, &typ, &app, &db, &wait); err != nil {
			return c, fmt.Errorf("pg_stat_activity: %w", err)
		}
		switch {
		case typ == "walsender":
			c.walSender++
			continue
		case typ != "client backend" || db != s.dbName || app == benchAppName:
			continue
		}
		if wait != "" {
			c.waits[wait]++
		}
		switch {
		case lent[pid] && !s.pooled:
			// PgBouncer's server connection, idle since an earlier
			// pooled cell: not this direct cell's.
			continue
		case lent[pid]:
			c.pooled++
		default:
			c.direct[app]++
		}
	}
	return c, rows.Err()
}

// benchAppName is the bench's own connections' application_name, left out
// of the counts.
const benchAppName = "inventory-bench"

// adminRows runs a SHOW command on PgBouncer's admin console (simple
// protocol only) and returns its rows as column → text.
func adminRows(ctx context.Context, conn *pgx.Conn, cmd string) ([]map[string]string, error) {
	rows, err := conn.Query(ctx, cmd, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, fmt.Errorf("PgBouncer %s: %w", cmd, err)
	}
	defer rows.Close()
	var out []map[string]string
	fields := rows.FieldDescriptions()
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, fmt.Errorf("PgBouncer %s: %w", cmd, err)
		}
		r := map[string]string{}
		for i, f := range fields {
			if vals[i] != nil {
				r[f.Name] = fmt.Sprint(vals[i])
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// scrapeMetrics reads an instance's /metrics (admin key) into name{labels} → value.
func scrapeMetrics(ctx context.Context, baseURL, adminKey string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: HTTP %d", resp.StatusCode)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m, sc.Err()
}

// cpuTicks is the CPU time, in clock ticks (USER_HZ, 100 a second on
// Linux), that a process has used (utime + stime, /proc/<pid>/stat), and
// with reaped children also theirs (cutime + cstime).
func cpuTicks(pid int, withChildren bool) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command may hold spaces and parentheses: fields start after the last ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return 0
	}
	sum := int64(0)
	n := 4 // utime, stime, cutime, cstime: fields 14..17, here 11..14
	if !withChildren {
		n = 2
	}
	for _, v := range f[11 : 11+n] {
		x, _ := strconv.ParseInt(v, 10, 64)
		sum += x
	}
	return sum
}

// treeTicks is the CPU time of a PostgreSQL cluster: its postmaster
// (with its reaped children: backends that exited) and its live children.
// Taken before and after a cell, the difference counts a backend that
// exited in between exactly once.
func treeTicks(postmaster int) int64 {
	sum := cpuTicks(postmaster, true)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if parentPid(pid) == postmaster {
			sum += cpuTicks(pid, false)
		}
	}
	return sum
}

func parentPid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// postmasterPid reads a data directory's postmaster.pid.
func postmasterPid(dataDir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

// ticksPerSecond is USER_HZ, which Linux fixes at 100 for /proc.
const ticksPerSecond = 100

// topWaits is "CPU 40%, Client:ClientRead 30%, …": the share of active
// backend samples per wait event, the n largest.
func topWaits(m map[string]int, n int) string {
	total := 0
	keys := make([]string, 0, len(m))
	for k, v := range m {
		keys = append(keys, k)
		total += v
	}
	if total == 0 {
		return "none active"
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	parts := []string{}
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", k, 100*float64(m[k])/float64(total)))
	}
	return strings.Join(parts, ", ")
}

// directSummary is "river 4, listen 1" for the per-application peaks.
func directSummary(m map[string]int) string {
	apps := make([]string, 0, len(m))
	for app := range m {
		apps = append(apps, app)
	}
	sort.Strings(apps)
	parts := make([]string, 0, len(apps))
	for _, app := range apps {
		name := strings.TrimPrefix(app, "inventory-")
		if name == "" {
			name = "unnamed"
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, m[app]))
	}
	return strings.Join(parts, ", ")
}
