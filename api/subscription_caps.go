package api

import (
	"context"
	"fmt"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"inventory/domain"
	"inventory/socket"
)

// SubscriptionCaps bound live subscriptions on this instance: each holds a
// goroutine and an event buffer (INVENTORY_SUBSCRIBER_BUFFER events), so one
// client must not open them without end. 0 is no cap.
type SubscriptionCaps struct {
	PerSocket int // on one WebSocket
	PerCaller int // of one key or checkout, over all its sockets and SSE streams
	// AnonymousPerIP bounds the subscriptions without a token of one client
	// address (IPv6 by /64), over all its sockets and SSE streams.
	AnonymousPerIP int
	// AnonymousSocketsPerIP bounds the WebSockets without a token one client
	// address holds open (anonymousSockets).
	AnonymousSocketsPerIP int
}

// subscriptionLimiter counts live subscriptions per caller and refuses one
// past a cap before it starts; the place is given back when the
// subscription ends, however it ends (completed by the client, the socket
// closed, the stream finished).
type subscriptionLimiter struct {
	caps     SubscriptionCaps
	mu       sync.Mutex
	byCaller map[string]int
}

func newSubscriptionLimiter(caps SubscriptionCaps) *subscriptionLimiter {
	return &subscriptionLimiter{caps: caps, byCaller: map[string]int{}}
}

// around is a gqlgen operation interceptor.
func (l *subscriptionLimiter) around(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	op := graphql.GetOperationContext(ctx)
	if op.Operation == nil || op.Operation.Operation != ast.Subscription {
		return next(ctx)
	}
	releaseSocket, ok := socket.AcquireSubscription(ctx, l.caps.PerSocket)
	if !ok {
		return refuse(fmt.Sprintf("this WebSocket already has %d live subscriptions (INVENTORY_WS_MAX_SUBSCRIPTIONS); complete one first", l.caps.PerSocket))
	}
	// Anonymous callers have no name: each client address is one caller,
	// with a cap of its own.
	actor := domain.ActorFrom(ctx)
	caller, limit, setting := "caller:"+actor.Name, l.caps.PerCaller, "INVENTORY_MAX_SUBSCRIPTIONS_PER_CALLER"
	if actor.Role == domain.RoleAnonymous {
		caller, limit, setting = ipKey(ctx), l.caps.AnonymousPerIP, "INVENTORY_ANONYMOUS_MAX_SUBSCRIPTIONS"
	}
	if !l.acquire(caller, limit) {
		releaseSocket()
		return refuse(fmt.Sprintf("this caller already has %d live subscriptions on this instance (%s)", limit, setting))
	}
	var once sync.Once
	release := func() { once.Do(func() { releaseSocket(); l.release(caller) }) }
	// A WebSocket subscription's context ends when the client completes it
	// or the socket closes; an SSE stream's when the request ends.
	context.AfterFunc(ctx, release)
	responses := next(ctx)
	return func(ctx context.Context) *graphql.Response {
		r := responses(ctx)
		if r == nil {
			release()
		}
		return r
	}
}

func (l *subscriptionLimiter) acquire(caller string, limit int) bool {
	if limit <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byCaller[caller] >= limit {
		return false
	}
	l.byCaller[caller]++
	return true
}

func (l *subscriptionLimiter) release(caller string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byCaller[caller]--; l.byCaller[caller] <= 0 {
		delete(l.byCaller, caller)
	}
}

// refuse answers a subscription with one error and ends it.
func refuse(message string) graphql.ResponseHandler {
	return graphql.OneShot(&graphql.Response{Errors: gqlerror.List{{Message: message, Extensions: map[string]any{"code": CodeBadRequest}}}})
}
