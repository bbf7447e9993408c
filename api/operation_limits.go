package api

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"inventory/auth"
	"inventory/domain"
	"inventory/socket"
)

// operationLimits holds an operation to what its caller may do over HTTP,
// whatever carried it. Over HTTP the middleware has done it all: the
// request spent its budget (budgets.rateLimit) and its context has the
// request timeout (Deadlines.Handle). A WebSocket is one upgrade request
// and then any number of operations, each one message, so for them this:
//
//   - spends the caller's read or write budget per operation, before gqlgen
//     parses it (MutateOperationParameters; the kind is read from the
//     document's tokens, as over HTTP): past it the operation gets a
//     RATE_LIMITED error, as HTTP's 429, and costs no parsing;
//   - bounds the queries and mutations in flight on one socket
//     (maxInFlight, INVENTORY_WS_MAX_IN_FLIGHT): one more is answered
//     RATE_LIMITED at once, and the socket stays open;
//
// and for queries and mutations over a WebSocket or SSE, which carry no
// deadline of their own, it applies the request timeout. An SSE
// subscription's credentials are checked again like a WebSocket's
// (watchCredential): the stream ends, its last event an UNAUTHENTICATED
// error, once they no longer hold.
type operationLimits struct {
	budgets     *budgets
	maxInFlight int
	timeout     time.Duration
}

var (
	_ graphql.HandlerExtension          = (*operationLimits)(nil)
	_ graphql.OperationParameterMutator = (*operationLimits)(nil)
)

// ExtensionName names the extension for gqlgen.
func (*operationLimits) ExtensionName() string { return "OperationLimits" }

// Validate accepts any schema.
func (*operationLimits) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationParameters spends a socket operation's budget before
// gqlgen parses, validates or costs its document. It changes nothing.
func (o *operationLimits) MutateOperationParameters(ctx context.Context, params *graphql.RawParams) *gqlerror.Error {
	if !socket.On(ctx) {
		return nil // an HTTP request has spent its budget already
	}
	if ok, retry := o.budgets.spend(ctx, operationWrites(params.Query, params.OperationName)); !ok {
		return &gqlerror.Error{Message: "too many requests from this caller; retry after " + retry + " seconds",
			Extensions: map[string]any{"code": CodeRateLimited}}
	}
	return nil
}

// around is a gqlgen operation interceptor.
func (o *operationLimits) around(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	op := graphql.GetOperationContext(ctx)
	if op.Operation == nil {
		return next(ctx)
	}
	kind := op.Operation.Operation
	onSocket := socket.On(ctx)
	if kind == ast.Subscription {
		if onSocket {
			return next(ctx) // the socket's credentials are watched from connection_init
		}
		return o.watchStream(ctx, next)
	}
	var release func() // the in-flight place on the socket, if any
	if onSocket {
		var ok bool
		if release, ok = socket.AcquireOperation(ctx, o.maxInFlight); !ok {
			return refuseWith(CodeRateLimited, fmt.Sprintf("this WebSocket already has %d queries and mutations in flight (INVENTORY_WS_MAX_IN_FLIGHT); wait for an answer before sending more", o.maxInFlight))
		}
	}
	return o.bounded(ctx, next, release)
}

// bounded runs a query or mutation under the request timeout, unless its
// context already has a deadline (a plain HTTP request's), and gives its
// in-flight place back (release, nil if none) when it is answered or
// abandoned.
func (o *operationLimits) bounded(ctx context.Context, next graphql.OperationHandler, release func()) graphql.ResponseHandler {
	var once sync.Once
	done := func() {}
	if release != nil {
		done = func() { once.Do(release) }
		context.AfterFunc(ctx, done) // the client completed it, or the socket closed
	}
	if _, has := ctx.Deadline(); has || o.timeout <= 0 {
		responses := next(ctx)
		return func(rctx context.Context) *graphql.Response {
			r := responses(rctx)
			done()
			return r
		}
	}
	deadline := time.Now().Add(o.timeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	responses := next(ctx)
	// The transport runs the operation when it asks for the response, with
	// a context of its own: the deadline goes on that one too.
	return func(rctx context.Context) *graphql.Response {
		rctx, cancelR := context.WithDeadline(rctx, deadline)
		defer cancelR()
		r := responses(rctx)
		cancel()
		done()
		return r
	}
}

// watchStream ends an SSE subscription once its credentials no longer
// authenticate its caller, with an UNAUTHENTICATED error as its last event.
func (o *operationLimits) watchStream(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	actor := domain.ActorFrom(ctx)
	recheck := auth.RecheckFrom(ctx)
	if recheck == nil || actor.Role == domain.RoleAnonymous {
		return next(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	var ended atomic.Pointer[string]
	watchCredential(ctx, actor, recheck, credentialRecheckInterval, func(reason string) {
		ended.Store(&reason)
		cancel()
	})
	responses := next(ctx)
	told := false
	return func(rctx context.Context) *graphql.Response {
		// The event source ends with ctx; waiting on rctx alone (the
		// request's) would outlive it.
		rctx, stop := mergeCancel(rctx, ctx)
		defer stop()
		r := responses(rctx)
		if r != nil {
			return r
		}
		cancel()
		if reason := ended.Load(); reason != nil && !told {
			told = true
			return &graphql.Response{Errors: gqlerror.List{{Message: "credentials no longer valid: " + *reason,
				Extensions: map[string]any{"code": CodeUnauthenticated}}}}
		}
		return nil
	}
}

// mergeCancel is a context of a that also ends when b does.
func mergeCancel(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() { stop(); cancel() }
}

// refuseWith answers an operation with one error and ends it.
func refuseWith(code, message string) graphql.ResponseHandler {
	return graphql.OneShot(&graphql.Response{Errors: gqlerror.List{{Message: message, Extensions: map[string]any{"code": code}}}})
}
