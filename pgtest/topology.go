package pgtest

import (
	"context"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The production topology (scripts/cluster.sh db, run by .ci/run's topology
// job): DATABASE_URL is then the primary, INVENTORY_TEST_POOLED_URL PgBouncer
// in transaction mode in front of it and INVENTORY_TEST_REPLICA_URL a
// streaming standby of it. Test databases are made on the primary as always;
// what the server does goes through PgBouncer, and outcomes are checked in
// SQL on the primary.

// Pooled reports whether tests run through a transaction pooler.
func Pooled() bool { return os.Getenv("INVENTORY_TEST_POOLED_URL") != "" }

// ServerEnv is the database part of a server's environment for the test
// database at dbURL (a URL of NewDatabase's): dbURL itself, or in the
// topology its name through PgBouncer for requests, dbURL for sessions and
// the standby's copy of it for reads.
func ServerEnv(t testing.TB, dbURL string) map[string]string {
	t.Helper()
	pooled := os.Getenv("INVENTORY_TEST_POOLED_URL")
	if pooled == "" || !sameServer(t, dbURL, URL(t)) {
		// Not through PgBouncer, or a database on a cluster of the test's
		// own (the faults package's), which PgBouncer does not front.
		return map[string]string{"DATABASE_URL": dbURL}
	}
	name := databaseName(t, dbURL)
	env := map[string]string{
		"DATABASE_URL":        withDatabase(t, pooled, name),
		"DATABASE_DIRECT_URL": dbURL,
		"INVENTORY_DB_POOLER": "transaction",
	}
	if replica := os.Getenv("INVENTORY_TEST_REPLICA_URL"); replica != "" {
		env["DATABASE_REPLICA_URL"] = withDatabase(t, replica, name)
	}
	return env
}

// PooledURL is where a test's own store work goes: through PgBouncer in the
// topology (so the store's statements are proven under transaction pooling),
// else dbURL.
func PooledURL(t testing.TB, dbURL string) string {
	t.Helper()
	return ServerEnv(t, dbURL)["DATABASE_URL"]
}

// poolConfig is a pool configuration for u that works through a
// transaction pooler when tests run through one: no named prepared
// statements, no startup parameters beyond application_name.
func poolConfig(t testing.TB, u string, params map[string]string) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	if Pooled() {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		return cfg
	}
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	return cfg
}

func sameServer(t testing.TB, a, b string) bool {
	t.Helper()
	pa, err := url.Parse(a)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	pb, err := url.Parse(b)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return pa.Host == pb.Host
}

func databaseName(t testing.TB, u string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return parsed.Path[1:]
}

// poolOn opens a pool for cfg, closed when the test ends.
func poolOn(t testing.TB, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// DirectURL is u (a test database's URL, maybe through PgBouncer) as a
// direct connection to the primary, for what needs a session: LISTEN,
// session advisory locks.
func DirectURL(t testing.TB, u string) string {
	t.Helper()
	if !Pooled() {
		return u
	}
	return withDatabase(t, URL(t), databaseName(t, u))
}
