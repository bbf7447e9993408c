// Package pgtest gives each test its own freshly migrated PostgreSQL database,
// so tests that commit run in parallel without seeing each other's rows.
//
// The first caller in any test process migrates a template database (named
// after a hash of the migrations, so a change of schema makes a new one); every
// test then clones it with CREATE DATABASE … TEMPLATE, which copies files and
// takes a fraction of the time migrating would. DATABASE_URL names the server
// and a role that may create databases; "make test" sets it up.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/migrations"
)

// templateLock serializes template creation across test processes.
const templateLock = 0x1_4E5E_47_7E57

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// URL returns DATABASE_URL, failing the test when it is unset: these tests are
// the product's guarantees and are never skipped.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("DATABASE_URL")
	if u == "" {
		t.Fatal("DATABASE_URL is not set: run the tests with `make test`, which starts PostgreSQL and sets it")
	}
	return u
}

// NewDatabase creates an empty, migrated database for this test, drops it when
// the test ends, and returns its connection URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	base := URL(t)
	ctx := context.Background()
	templateOnce.Do(func() { templateName, templateErr = ensureTemplate(ctx, base) })
	if templateErr != nil {
		t.Fatalf("pgtest: template: %v", templateErr)
	}
	name := testDatabaseName()
	admin := connect(t, base)
	defer admin.Close(ctx)
	// CREATE DATABASE fails if another session is connected to the template at
	// that moment (only ever template creation, which is over); retry briefly.
	var err error
	for range 20 {
		if _, err = admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, templateName)); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		if err := dropDatabase(base, name); err != nil {
			t.Errorf("pgtest: drop %s: %v", name, err)
		}
	})
	return withDatabase(t, base, name)
}

// runID names this test run's databases: INVENTORY_TEST_RUN when make test
// sets it (it drops that run's leftovers, and only those, at the end), else
// one per test process.
var runID = sync.OnceValue(func() string {
	if id := os.Getenv("INVENTORY_TEST_RUN"); id != "" {
		return id
	}
	return "p" + randomHex(4)
})

// testDatabaseName is a fresh database name of this run.
func testDatabaseName() string { return "inventory_test_" + runID() + "_" + randomHex(6) }

// NewEmptyDatabase creates a database with no schema at all (not migrated),
// drops it when the test ends, and returns its connection URL: for tests of
// what happens before `inventory migrate`.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	base := URL(t)
	name := testDatabaseName()
	admin := connect(t, base)
	defer admin.Close(context.Background())
	if _, err := admin.Exec(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		if err := dropDatabase(base, name); err != nil {
			t.Errorf("pgtest: drop %s: %v", name, err)
		}
	})
	return withDatabase(t, base, name)
}

// NewPool is NewDatabase plus a pool on it, closed when the test ends;
// through PgBouncer in the topology (topology.go).
// Commits do not wait for the WAL flush: durability is not what tests test.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg := poolConfig(t, PooledURL(t, NewDatabase(t)), map[string]string{"synchronous_commit": "off"})
	cfg.MaxConns = 20
	return poolOn(t, cfg)
}

// dropDatabase drops a test database, ending its connections. An autovacuum
// worker can be connected at that moment; ending it needs pg_signal_backend
// (make test grants it), so a refusal is retried briefly for roles without it.
func dropDatabase(base, name string) error {
	c, err := pgx.Connect(context.Background(), base)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	for attempt := 0; ; attempt++ {
		_, err = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		var pgErr *pgconn.PgError
		if err == nil || attempt == 50 || !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func ensureTemplate(ctx context.Context, base string) (string, error) {
	hash, err := migrationsHash()
	if err != nil {
		return "", err
	}
	name := "inventory_tmpl_" + hash
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(templateLock)); err != nil {
		return "", err
	}
	defer admin.Exec(ctx, "SELECT pg_advisory_unlock($1)", int64(templateLock)) //nolint:errcheck
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	// Build under a temporary name and rename when complete, so a crash
	// half-way never leaves a template that looks finished.
	building := name + "_building"
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return "", err
	}
	u, err := replaceDatabase(base, building)
	if err != nil {
		return "", err
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return "", err
	}
	_, err = migrations.Up(ctx, pool, slog.New(slog.DiscardHandler))
	pool.Close()
	if err != nil {
		return "", fmt.Errorf("migrate template: %w", err)
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+building+" RENAME TO "+name); err != nil {
		return "", err
	}
	return name, nil
}

// migrationsHash names the template after the schema it holds.
func migrationsHash() (string, error) {
	h := sha256.New()
	for _, name := range migrations.Names() {
		fmt.Fprintln(h, name) // a renumbered migration is another schema history
		f, err := migrations.Open(name)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", err
		}
	}
	fmt.Fprint(h, migrations.RiverVersion())
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

func connect(t testing.TB, u string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), u)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	return c
}

func withDatabase(t testing.TB, base, name string) string {
	t.Helper()
	u, err := replaceDatabase(base, name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func replaceDatabase(base, name string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("pgtest: DATABASE_URL must be a URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// MigrationUp is the Up section of an embedded migration file, for tests that
// replay one migration over data an older version wrote (goose itself refuses
// to re-apply a version below later ones).
func MigrationUp(t testing.TB, name string) string {
	t.Helper()
	f, err := migrations.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	text, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	up, _, ok := strings.Cut(string(text), "-- +goose Down")
	if !ok {
		t.Fatalf("%s has no Down section", name)
	}
	return up
}
