package api

import (
	"context"
	"fmt"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"inventory/domain"
)

// AnonymousShare bounds how much of the request pool anonymous callers use
// at once: each root field of an anonymous query (availability, sku,
// locations: one database read each) runs only while it holds one of its
// slots. gqlgen runs a query's root fields concurrently, so without it one
// anonymous request of n aliases would take n connections, and a few such
// clients the whole pool, with a checkout's reserve queued behind them.
// With n slots, INVENTORY_DB_MAX_CONNS − n connections are always left to
// callers with a token (checkouts, service and admin keys).
//
// A field waits for a slot at most as long as its request may take
// (INVENTORY_REQUEST_TIMEOUT): then it fails as a request that took too
// long. Mutations are not counted (anonymous callers have none that reach
// the database). availabilityChanged's reads, which any caller may start
// and which run off the request, take their slots through Acquire
// (resolvers.Resolver.LiveShare).
type AnonymousShare struct{ slots chan struct{} }

// NewAnonymousShare returns a share of n slots; n < 1 is no bound (nil).
func NewAnonymousShare(n int) *AnonymousShare {
	if n < 1 {
		return nil
	}
	return &AnonymousShare{slots: make(chan struct{}, n)}
}

// Acquire waits for a slot, or for ctx to end, and returns its release.
// A nil share has no bound.
func (a *AnonymousShare) Acquire(ctx context.Context) (release func(), err error) {
	if a == nil {
		return func() {}, nil
	}
	select {
	case a.slots <- struct{}{}:
		return func() { <-a.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// around is the root field middleware (handler.Server.AroundRootFields).
func (a *AnonymousShare) around(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	if a == nil || domain.ActorFrom(ctx).Role != domain.RoleAnonymous {
		return next(ctx)
	}
	if op := graphql.GetOperationContext(ctx).Operation; op == nil || op.Operation != ast.Query {
		return next(ctx)
	}
	release, err := a.Acquire(ctx)
	if err != nil {
		graphql.AddError(ctx, fmt.Errorf("waiting for the anonymous share of the database: %w", err))
		return graphql.Null
	}
	defer release()
	return next(ctx)
}
