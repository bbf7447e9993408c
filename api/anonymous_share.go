package api

import (
	"context"
	"fmt"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"inventory/domain"
)

// anonymousShare bounds how much of the request pool anonymous callers use
// at once: each root field of an anonymous query (availability, sku,
// locations: one database read each) runs only while it holds one of its
// slots. gqlgen runs a query's root fields concurrently, so without it one
// anonymous request of 20 aliases took 20 connections, and eight such
// clients took the whole pool: a checkout's reserve queued behind them for
// seconds. With n slots, INVENTORY_DB_MAX_CONNS − n connections are always
// left to callers with a token (checkouts, service and admin keys).
//
// A field waits for a slot at most as long as its request may take
// (INVENTORY_REQUEST_TIMEOUT): then it fails as a request that took too
// long. Mutations and subscriptions are not counted (anonymous callers have
// none that reach the database).
type anonymousShare struct{ slots chan struct{} }

// newAnonymousShare returns a share of n slots; n < 1 is no bound.
func newAnonymousShare(n int) *anonymousShare {
	if n < 1 {
		return nil
	}
	return &anonymousShare{slots: make(chan struct{}, n)}
}

// around is the root field middleware (handler.Server.AroundRootFields).
func (a *anonymousShare) around(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	if a == nil || domain.ActorFrom(ctx).Role != domain.RoleAnonymous {
		return next(ctx)
	}
	if op := graphql.GetOperationContext(ctx).Operation; op == nil || op.Operation != ast.Query {
		return next(ctx)
	}
	select {
	case a.slots <- struct{}{}:
	case <-ctx.Done():
		graphql.AddError(ctx, fmt.Errorf("waiting for the anonymous share of the database: %w", ctx.Err()))
		return graphql.Null
	}
	defer func() { <-a.slots }()
	return next(ctx)
}
