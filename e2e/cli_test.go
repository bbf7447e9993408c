package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/app"
	"inventory/cli"
	"inventory/config"
	"inventory/pgtest"
)

// cliRun runs one command line with env as the whole environment.
func cliRun(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := cli.Run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// tablesIn counts the tables of every schema but the system's: what any
// migration, key or row would have needed.
func tablesIn(t *testing.T, url string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestHelpTouchesNothing: for every command, -h, --help and `help COMMAND`
// print its usage and succeed without any setting, and with a database
// configured they leave it untouched (no migration, key or row).
func TestHelpTouchesNothing(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	commands := [][]string{{}, {"serve"}, {"migrate"}, {"migrate", "status"}, {"token"}, {"token", "create"},
		{"token", "revoke"}, {"import"}, {"codes"}, {"codes", "rekey"}, {"stock"}, {"stock", "import"}, {"reconcile"}, {"demo"}, {"version"}, {"settings"}}
	for _, env := range []map[string]string{{}, {"DATABASE_URL": url, "INVENTORY_TOKEN_SECRET": strings.Repeat("t", 32),
		"INVENTORY_CODES_KEY": "k1:" + testCodesKey, "INVENTORY_CODES_HMAC_KEY": testHMACKey, "LISTEN_ADDR": "127.0.0.1:0"}} {
		for _, cmd := range commands {
			for _, form := range [][]string{append(append([]string{}, cmd...), "-h"), append(append([]string{}, cmd...), "--help"), append([]string{"help"}, cmd...)} {
				stdout, stderr, err := cliRun(t, env, form...)
				if err != nil || !strings.Contains(stdout, "Usage:") || stderr != "" {
					t.Fatalf("inventory %s: err %v, stderr %q, stdout %q", strings.Join(form, " "), err, stderr, stdout)
				}
			}
		}
	}
	if n := tablesIn(t, url); n != 0 {
		t.Fatalf("help created %d tables", n)
	}
}

// TestCommandLineErrors: unknown flags, and missing or extra arguments,
// print the error and the usage and are usage errors (exit 2; an unknown
// command is one too, in a few lines: TestCLIUnknownCommandSuggests);
// invalid settings are reported by name, for commands that need them only.
func TestCommandLineErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--bogus"}, {"migrate", "status", "extra"}, {"token"}, {"token", "revoke"},
		{"token", "create", "--name", "x"}, {"token", "create", "--role", "root", "--name", "x"}, {"import", "--sku", "S"}, {"version", "now"}} {
		_, stderr, err := cliRun(t, map[string]string{}, args...)
		var usage cli.UsageError
		if !errors.As(err, &usage) || !strings.Contains(stderr, "Usage:") {
			t.Errorf("inventory %s: err %v (want a usage error), stderr %q", strings.Join(args, " "), err, stderr)
		}
	}
	_, _, err := cliRun(t, map[string]string{}, "reconcile")
	if err == nil || !strings.Contains(err.Error(), "DATABASE_URL is not set") {
		t.Fatalf("reconcile without DATABASE_URL: %v", err)
	}
	var usage cli.UsageError
	if errors.As(err, &usage) {
		t.Fatal("a missing setting is not a usage error")
	}
	stdout, _, err := cliRun(t, map[string]string{}, "version")
	if err != nil || !strings.HasPrefix(stdout, "inventory ") || !strings.Contains(stdout, "commit") {
		t.Fatalf("version: %q %v", stdout, err)
	}
}

// TestMigrateReports: migrate lists what it applied, then says it is up to
// date; migrate status lists every migration as pending before and applied
// after.
func TestMigrateReports(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": pgtest.NewEmptyDatabase(t)}
	out, _, err := cliRun(t, env, "migrate", "status")
	if err != nil || !strings.Contains(out, "pending   inventory   1  00001_foundation.sql") || !strings.Contains(out, "\n0 of ") {
		t.Fatalf("status before: %v\n%s", err, out)
	}
	out, _, err = cliRun(t, env, "migrate")
	if err != nil || !strings.Contains(out, "applied   river") || !strings.Contains(out, "applied   inventory   7  00007_stock_events_head.sql") {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	out, _, err = cliRun(t, env, "migrate")
	if err != nil || strings.TrimSpace(out) != "up to date: nothing to apply" {
		t.Fatalf("migrate again: %v\n%s", err, out)
	}
	out, _, err = cliRun(t, env, "migrate", "status")
	if err != nil || strings.Contains("\n"+out, "\npending ") || !strings.Contains(out, " 0 pending") {
		t.Fatalf("status after: %v\n%s", err, out)
	}
}

// TestCLIErrorsNameNoPackages: a refused command says what was wrong in the
// user's terms, not which Go function refused it.
func TestCLIErrorsNameNoPackages(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	file := filepath.Join(t.TempDir(), "codes.txt")
	if err := os.WriteFile(file, []byte("code\nAAAA-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := cliRun(t, ts.env, "import", "--sku", "NOPE", "--location", "AMS", "--batch", "B1", file)
	if err == nil || strings.Contains(err.Error(), "store.") || strings.Contains(err.Error(), "UNKNOWN_SKU") || !strings.Contains(err.Error(), "NOPE") {
		t.Fatalf("import of an unknown SKU: %v", err)
	}
	_, _, err = cliRun(t, ts.env, "token", "revoke", "no-such-key")
	if err == nil || strings.Contains(err.Error(), "store.") {
		t.Fatalf("revoke of an unknown key: %v", err)
	}
}

// TestInvalidSettings: invalid settings are refused with the allowed values.
func TestInvalidSettings(t *testing.T) {
	t.Parallel()
	for env, want := range map[string]string{
		"INVENTORY_LOG_LEVEL=verbose":          "INVENTORY_LOG_LEVEL must be debug, info, warn or error",
		"INVENTORY_RUN_JOBS=maybe":             "INVENTORY_RUN_JOBS must be true or false",
		"INVENTORY_MIGRATE_ON_START=on":        "INVENTORY_MIGRATE_ON_START must be true or false",
		"INVENTORY_SWEEP_INTERVAL=soon":        "INVENTORY_SWEEP_INTERVAL must be a positive duration such as 30s",
		"INVENTORY_DB_ANONYMOUS_CONNS=20":      "INVENTORY_DB_ANONYMOUS_CONNS must be at most INVENTORY_DB_MAX_CONNS - 1 (19)",
		"INVENTORY_MAX_QUERY_TOKENS=0":         "INVENTORY_MAX_QUERY_TOKENS must be a positive integer",
		"INVENTORY_EVENTS_RELAY_TIMEOUT=100ms": "INVENTORY_EVENTS_RELAY_TIMEOUT must be at least 1s",
		"INVENTORY_EVENTS_MAX_STALL=10s":       "INVENTORY_EVENTS_MAX_STALL must be longer than twice INVENTORY_EVENTS_RELAY_TIMEOUT (5s)",
	} {
		k, v, _ := strings.Cut(env, "=")
		_, _, err := cliRun(t, map[string]string{"DATABASE_URL": "postgres://unused", k: v}, "serve")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", env, err, want)
		}
	}
}

// TestServeWaitsForMigrations: an instance that may not migrate
// (INVENTORY_MIGRATE_ON_START=false) on a database that is behind serves
// /healthz, and /readyz 503 saying to run `inventory migrate`, reads no table
// meanwhile, and becomes ready by itself once another process has migrated.
func TestServeWaitsForMigrations(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	addr := freeAddr(t)
	env := map[string]string{"DATABASE_URL": url, "INVENTORY_MIGRATE_ON_START": "false", "LISTEN_ADDR": addr, "INVENTORY_LOG_LEVEL": "warn",
		"INVENTORY_TOKEN_SECRET": strings.Repeat("t", 32), "INVENTORY_CODES_KEY": "k1:" + testCodesKey, "INVENTORY_CODES_HMAC_KEY": testHMACKey}
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan *app.Server, 1)
	go func() {
		srv, err := app.Start(ctx, cfg, app.NewLogger(testWriter{t}, "warn"))
		if err != nil {
			t.Error(err)
		}
		started <- srv
	}()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitUntil(t, 10*time.Second, "the waiting instance to answer", func() bool { code, _ := get("/healthz"); return code == 200 })
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "run `inventory migrate`") {
		t.Fatalf("/readyz while unmigrated: %d %q", code, body)
	}
	if code, _ := get("/graphql"); code != 503 {
		t.Fatalf("/graphql while unmigrated: %d", code)
	}
	if n := tablesIn(t, url); n != 0 {
		t.Fatalf("the waiting instance created %d tables", n)
	}
	if _, _, err := cliRun(t, map[string]string{"DATABASE_URL": url}, "migrate"); err != nil {
		t.Fatal(err)
	}
	var srv *app.Server
	select {
	case srv = <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the instance did not start within 30 s of the migration")
	}
	if srv == nil {
		t.FailNow()
	}
	waitUntil(t, 10*time.Second, "/readyz 200 after the migration", func() bool { code, _ := get("/readyz"); return code == 200 })
	r, err := gqlTo("http://"+addr, "", `{ locations { code } }`, nil)
	if err != nil || len(r.Errors) > 0 {
		t.Fatalf("a query after the migration: %+v %v", r, err)
	}
	cancel()
	if err := srv.Wait(); err != nil {
		t.Fatal(err)
	}
}
