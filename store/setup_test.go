package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/domain"
	"inventory/pgtest"
	"inventory/store"
)

// testBundle is what most store tests need: a store on a database of its own
// and a context acting as an admin.
type testBundle struct {
	ctx   context.Context
	pool  *pgxpool.Pool
	store *store.Store
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool := pgtest.NewPool(t)
	ctx := domain.WithActor(context.Background(), domain.Actor{Role: domain.RoleAdmin, Name: "test-admin"})
	return &testBundle{ctx: ctx, pool: pool, store: store.New(pool)}
}
