package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"inventory/pgtest"
	"inventory/store"
)

// readyzAnswer is one GET /readyz: its status and body (-1 and the error
// when there is no answer).
func readyzAnswer(url string) (int, string) {
	resp, err := probeClient.Get(url + "/readyz")
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitReadyz polls /readyz of every url, four times a second, until cond holds for
// all of them or within passes; it returns how long it took and the last
// answers.
func waitReadyz(t *testing.T, within time.Duration, what string, urls []string, cond func(code int, body string) bool) (time.Duration, []string) {
	t.Helper()
	start := time.Now()
	for {
		var last []string
		all := true
		for _, u := range urls {
			code, body := readyzAnswer(u)
			last = append(last, http.StatusText(code)+": "+strings.TrimSpace(body))
			all = all && cond(code, body)
		}
		if all {
			return time.Since(start), last
		}
		if time.Since(start) > within {
			t.Fatalf("%s: not within %s; /readyz answered %q", what, within, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestReadyzReportsStalledStream: a stream that has stopped moving while
// events wait is not ready. Something the relay's own bound does not cover
// (here a session of the test's, standing for another program or an older
// binary) holds the relay's lock in an idle transaction, and a change waits
// for the relay: both instances' /readyz turn 503 saying the stream is
// stalled, in words (no SQL, host or user), within INVENTORY_EVENTS_MAX_STALL
// plus a fetch; the log says so once. When the lock is let go the stream
// moves on and both are ready again by themselves.
func TestReadyzReportsStalledStream(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_EVENTS_RELAY_TIMEOUT": "1s", "INVENTORY_EVENTS_MAX_STALL": "3s"})
	second, _ := ts.startInstance()
	urls := []string{ts.url, second}
	ts.seed("HP", 10)
	unpublished := func() int { return ts.count(`SELECT count(*) FROM stock_events WHERE seq IS NULL`) }
	waitUntil(t, 60*time.Second, "the seed's events to be published", func() bool { return unpublished() == 0 })

	ctx := context.Background()
	tx, err := ts.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, store.RelayLockKey); err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	ts.mustData(ts.gql(ts.admin, `mutation { receiveStock(input: {sku: "HP", location: "AMS", quantity: 1, reference: "PO-STALL"}) { userErrors { code } } }`, nil), "receiveStock", &p)
	changed := time.Now()

	took, answers := waitReadyz(t, 60*time.Second, "both instances to report the stalled stream", urls, func(code int, body string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(body, "live events stalled")
	})
	for _, a := range answers {
		for _, leak := range []string{"SQLSTATE", "pg_", "advisory", "stock_events", "127.0.0.1", "user=", "database="} {
			if strings.Contains(a, leak) {
				t.Errorf("/readyz names %q: %s", leak, a)
			}
		}
	}
	if n := unpublished(); n != 1 {
		t.Fatalf("%d events unpublished while the lock was held; want the 1 change", n)
	}
	t.Logf("stalled: /readyz 503 on both instances %.1f s after the change (bound 3 s): %q", took.Seconds(), answers)
	if !strings.Contains(ts.logs.String(), "the stream is stalled") {
		t.Errorf("the log does not say the stream stalled:\n%s", ts.logs.String())
	}

	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	took, _ = waitReadyz(t, 60*time.Second, "both instances ready again", urls, func(code int, _ string) bool { return code == http.StatusOK })
	if n := unpublished(); n != 0 {
		t.Fatalf("%d events unpublished after the lock was let go and both instances were ready", n)
	}
	t.Logf("moving again: both ready %.1f s after the lock was let go, held %.1f s after the change", took.Seconds(), released.Sub(changed).Seconds())
}

// TestReadyzNamesNoHostUserOrSQL: /readyz answers anyone, so when the
// database cannot be reached it says so in words and names no host, port,
// user, database or SQL; the details go to the log. The instance's database
// stops taking connections (ALLOW_CONNECTIONS false) and its sessions are
// ended, so every pool, the event broker's included, fails to connect.
func TestReadyzNamesNoHostUserOrSQL(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ctx := context.Background()
	dbURL := pgtest.DirectURL(t, ts.env["DATABASE_URL"])
	pc, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	// A session on another database of the server (one cannot lock out the
	// database one is connected to), kept open to let connections in again.
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	db := pgx.Identifier{pc.Database}.Sanitize()
	allow := func(on bool) {
		t.Helper()
		if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s WITH ALLOW_CONNECTIONS %t", db, on)); err != nil {
			t.Fatal(err)
		}
	}
	allow(false)
	t.Cleanup(func() { // before the instance stops and the database is dropped
		allow(true)
		conn.Close(ctx)
	})
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, pc.Database); err != nil {
		t.Fatal(err)
	}

	// Not ready, and the broker has found it cannot read new events (its
	// reason comes first).
	waitReadyz(t, 60*time.Second, "/readyz to fail while the database refuses connections", []string{ts.url}, func(code int, _ string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(ts.logs.String(), "events: fetch")
	})
	leaks := []string{pc.Database, "user=", "user=" + pc.User, `"` + pc.User + `"`, "SQLSTATE", "FATAL", "failed to connect",
		"127.0.0.1", "localhost", pc.Host, fmt.Sprintf(":%d", pc.Port), "accepting connections", "store."}
	for range 3 {
		code, body := readyzAnswer(ts.url)
		if code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz %d %q while the database refuses connections", code, body)
		}
		var named []string
		for _, leak := range leaks {
			if strings.Contains(body, leak) {
				named = append(named, leak)
			}
		}
		if len(named) > 0 {
			t.Fatalf("/readyz names %q: %q", named, body)
		}
		t.Logf("/readyz: %d %q", code, strings.TrimSpace(body))
		time.Sleep(250 * time.Millisecond)
	}
	// The details are in the log, for whoever runs the server: PostgreSQL's
	// refusal (SQLSTATE 55000), or through PgBouncer its own.
	var logged bool
	for line := range strings.SplitSeq(ts.logs.String(), "\n") {
		logged = logged || (strings.Contains(line, `msg="not ready"`) && strings.Contains(line, "SQLSTATE") && !strings.Contains(line, "57P01"))
	}
	if !logged {
		t.Errorf("no log line says why the instance is not ready (the connection's error, with its SQLSTATE):\n%s", ts.logs.String())
	}

	allow(true)
	waitReadyz(t, 60*time.Second, "the instance ready again once the database takes connections", []string{ts.url}, func(code int, _ string) bool { return code == http.StatusOK })
}
