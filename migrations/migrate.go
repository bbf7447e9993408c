// Package migrations holds the server's numbered SQL migrations and applies
// them, with River's own, through goose and rivermigrate. Files are embedded so
// the binary migrates any database it is pointed at.
package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed *.sql
var files embed.FS

// lockID serializes migrations across server instances starting at once.
const lockID = 0x1_4E5E_47_0001

// Migration is one migration of either set: River's own ("river") or this
// server's ("inventory"), with whether the database has it.
type Migration struct {
	Set     string
	Version int64
	Name    string
	Applied bool
}

func (m Migration) String() string { return fmt.Sprintf("%-9s %3d  %s", m.Set, m.Version, m.Name) }

// Up applies every pending migration, River's first (our tables do not depend on
// them, but jobs inserted by our code do), and returns the ones it applied.
// Safe to call from several processes at once: they queue on an advisory lock.
func Up(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) ([]Migration, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: acquire: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(lockID)); err != nil {
		return nil, fmt.Errorf("migrations: lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(lockID)) //nolint:errcheck // released with the session anyway

	river, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("migrations: river: %w", err)
	}
	res, err := river.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return nil, fmt.Errorf("migrations: river up: %w", err)
	}
	var applied []Migration
	for _, v := range res.Versions {
		applied = append(applied, Migration{Set: "river", Version: int64(v.Version), Name: v.Name, Applied: true})
	}
	provider, closeDB, err := newProvider(pool, logger)
	if err != nil {
		return applied, err
	}
	defer closeDB()
	results, err := provider.Up(ctx)
	for _, r := range results {
		if r.Error == nil {
			applied = append(applied, Migration{Set: "inventory", Version: r.Source.Version, Name: filepath.Base(r.Source.Path), Applied: true})
		}
	}
	if err != nil {
		return applied, fmt.Errorf("migrations: up: %w", err)
	}
	return applied, nil
}

// Status lists every migration this binary knows, River's then the server's,
// in order, with whether the database has it. It changes nothing.
func Status(ctx context.Context, pool *pgxpool.Pool) ([]Migration, error) {
	river, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("migrations: river: %w", err)
	}
	existing, err := river.ExistingVersions(ctx)
	if err != nil && !isUndefinedTable(err) {
		return nil, fmt.Errorf("migrations: river versions: %w", err)
	}
	have := map[int]bool{}
	for _, m := range existing {
		have[m.Version] = true
	}
	var out []Migration
	for _, m := range river.AllVersions() {
		out = append(out, Migration{Set: "river", Version: int64(m.Version), Name: m.Name, Applied: have[m.Version]})
	}
	provider, closeDB, err := newProvider(pool, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer closeDB()
	status, err := provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: status: %w", err)
	}
	for _, s := range status {
		out = append(out, Migration{Set: "inventory", Version: s.Source.Version, Name: filepath.Base(s.Source.Path), Applied: s.State == goose.StateApplied})
	}
	return out, nil
}

// isUndefinedTable is PostgreSQL's 42P01: River's table is not there yet.
func isUndefinedTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01"
}

// Pending reports a human-readable reason when the database is not migrated to
// what this binary expects, or "" when it is current. Readiness uses it.
func Pending(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	river, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return "", fmt.Errorf("migrations: river: %w", err)
	}
	res, err := river.Validate(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("migrations: river validate: %w", err)
	}
	if !res.OK {
		return fmt.Sprintf("River's schema is behind: %v; run `inventory migrate`", res.Messages), nil
	}
	provider, closeDB, err := newProvider(pool, slog.New(slog.DiscardHandler))
	if err != nil {
		return "", err
	}
	defer closeDB()
	current, target, err := provider.GetVersions(ctx)
	if err != nil {
		return "", fmt.Errorf("migrations: versions: %w", err)
	}
	if current < target {
		return fmt.Sprintf("schema at version %d, this binary needs %d: run `inventory migrate`", current, target), nil
	}
	return "", nil
}

func newProvider(pool *pgxpool.Pool, logger *slog.Logger) (*goose.Provider, func(), error) {
	db := stdlib.OpenDBFromPool(pool)
	provider, err := goose.NewProvider(goose.DialectPostgres, db, files, goose.WithSlog(logger))
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migrations: goose: %w", err)
	}
	return provider, func() { db.Close() }, nil
}

// Names lists the embedded migration files in order; with Open and
// RiverVersion it lets the test helper fingerprint the schema.
func Names() []string {
	entries, _ := files.ReadDir(".") // embedded: cannot fail
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// Open opens one embedded migration file.
func Open(name string) (fs.File, error) { return files.Open(name) }

// RiverVersion is the newest River migration this binary applies.
func RiverVersion() int {
	m, err := rivermigrate.New(riverpgxv5.New(nil), nil)
	if err != nil {
		return 0
	}
	all := m.AllVersions()
	return all[len(all)-1].Version
}
