package api

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"inventory/domain"
)

// anonymousCPU bounds how many anonymous queries execute at once on this
// instance, wherever their answers come from: the anonymous share bounds
// their database connections, but answers from the in-memory copy need
// none, and a few clients of the heaviest accepted document can keep every
// core busy, leaving a checkout's reserve waiting for a core. With half the
// cores (at least one) for anonymous execution, the rest are left to
// callers with a token. Decoding an anonymous JSON body (limitBody, after
// it has arrived: a body near the size limit is milliseconds of CPU) and
// executing a query each hold a slot; reading the body and writing the
// answer (which a client may not read) hold none.
type anonymousCPU struct{ slots chan struct{} }

// newAnonymousCPU returns slots for half the usable cores, at least one.
func newAnonymousCPU() *anonymousCPU {
	return &anonymousCPU{slots: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))}
}

// acquire takes a slot for an anonymous caller's work on ctx (waiting for
// one, or ctx), and returns its release; callers with a token go at once.
func (a *anonymousCPU) acquire(ctx context.Context) (func(), error) {
	if domain.ActorFrom(ctx).Role != domain.RoleAnonymous {
		return func() {}, nil
	}
	select {
	case a.slots <- struct{}{}:
		return func() { <-a.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// around is an operation interceptor: it must enclose the executions it
// bounds (fastAvailability computes its answer when called).
func (a *anonymousCPU) around(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	op := graphql.GetOperationContext(ctx).Operation
	if op == nil || op.Operation != ast.Query || domain.ActorFrom(ctx).Role != domain.RoleAnonymous {
		return next(ctx)
	}
	select {
	case a.slots <- struct{}{}:
	case <-ctx.Done():
		return refuseWith(CodeInternal, fmt.Sprintf("took too long waiting for the anonymous share of this instance's CPU (%v); nothing changed", ctx.Err()))
	}
	var once sync.Once
	release := func() { once.Do(func() { <-a.slots }) }
	stop := context.AfterFunc(ctx, release) // never answered: the slot comes back with the request
	responses := next(ctx)
	return func(rctx context.Context) *graphql.Response {
		r := responses(rctx)
		stop()
		release()
		return r
	}
}
