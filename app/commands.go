package app

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/config"
	"inventory/migrations"
	"inventory/store"
	"inventory/tracing"
)

// cliPoolConns is the size of a command's pool (INVENTORY_DB_MAX_CONNS is
// the server's): each command works through one connection at a time, and
// River's and goose's migrators through at most two.
const cliPoolConns = 4

// withPool runs fn with a command's pool on the direct connection.
func withPool(ctx context.Context, cfg config.Config, fn func(*pgxpool.Pool) error) error {
	pool, err := openPool(ctx, cfg, directConnection(cfg), "cli", cliPoolConns, nil)
	if err != nil {
		return err
	}
	defer pool.Close()
	return fn(pool)
}

// WithPlainStore runs fn with a store on a CLI pool: one that cannot seal
// or open codes, for commands that touch none.
func WithPlainStore(ctx context.Context, cfg config.Config, fn func(*store.Store) error) error {
	return withPool(ctx, cfg, func(pool *pgxpool.Pool) error {
		st, err := newStore(pool, tracing.Off())
		if err != nil {
			return err
		}
		return fn(st)
	})
}

// WithStore runs fn with a store that can seal and open codes, after the
// same key check the server does at start-up.
func WithStore(ctx context.Context, cfg config.Config, fn func(*store.Store) error) error {
	keyring, err := cfg.Keyring()
	if err != nil {
		return err
	}
	return WithPlainStore(ctx, cfg, func(st *store.Store) error {
		st.Keyring = keyring
		if err := st.CodesKeyCheck(ctx); err != nil {
			return err
		}
		return fn(st)
	})
}

// Migrate applies every pending migration (River's, then the server's) on a
// command's pool and returns what it applied, also when it stopped at an
// error.
func Migrate(ctx context.Context, cfg config.Config, logger *slog.Logger) (applied []migrations.Migration, err error) {
	err = withPool(ctx, cfg, func(pool *pgxpool.Pool) error {
		applied, err = migrations.Up(ctx, pool, logger)
		return err
	})
	return applied, err
}

// MigrationStatus lists every migration this binary knows and whether the
// database has it.
func MigrationStatus(ctx context.Context, cfg config.Config) (all []migrations.Migration, err error) {
	err = withPool(ctx, cfg, func(pool *pgxpool.Pool) error {
		all, err = migrations.Status(ctx, pool)
		return err
	})
	return all, err
}
