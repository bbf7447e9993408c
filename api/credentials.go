package api

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"

	"inventory/auth"
	"inventory/domain"
	"inventory/socket"
)

// authenticateSocket authenticates a WebSocket on connection_init, from the
// payload's Authorization (browsers cannot set headers on a WebSocket), else
// the upgrade request's header. A socket without a token is anonymous, as
// an HTTP request without one: it may subscribe to availabilityChanged (and
// run what anonymous callers may), and its address may hold anon.max such
// sockets (4429 past it); any other subscription on it closes it with 4401.
// A socket whose token does not authenticate is closed with 4401 at once;
// one whose token could not be checked (database down) with 1013, so the
// client retries with it; one from an address that has spent its failed
// authentications with 4429 (authGuard), its token unchecked.
func authenticateSocket(guard *authGuard, anon *anonymousSockets) transport.WebsocketInitFunc {
	return func(ctx context.Context, payload transport.InitPayload) (context.Context, *transport.InitPayload, error) {
		actor := domain.ActorFrom(ctx)
		recheck := auth.RecheckFrom(ctx)
		if header := payload.Authorization(); header != "" {
			recheck = func(ctx context.Context) (domain.Actor, error) { return guard.authn.Authenticate(ctx, header) }
			var err error
			if actor, err = guard.authenticate(ctx, header); errors.Is(err, errTooManyFailures) {
				return transport.AppendCloseReason(transport.WithWebsocketCloseCode(ctx, socket.CloseTooManyFailures), err.Error()), nil, err
			} else if err != nil {
				// The database did not answer: the token may be fine.
				return transport.WithWebsocketCloseCode(ctx, socket.CloseTryAgain), nil, errors.New("authentication unavailable, try again")
			}
		}
		if actor.Role == domain.RoleAnonymous && actor.TokenProblem != "" {
			reason := actor.TokenProblem
			ctx = transport.AppendCloseReason(transport.WithWebsocketCloseCode(ctx, socket.CloseUnauthenticated), reason)
			return ctx, nil, errors.New(reason)
		}
		if actor.Role == domain.RoleAnonymous {
			if !anon.acquire(ctx) {
				reason := fmt.Sprintf("this address already has %d WebSockets without a token open (INVENTORY_ANONYMOUS_MAX_SOCKETS)", anon.max)
				ctx = transport.AppendCloseReason(transport.WithWebsocketCloseCode(ctx, socket.CloseTooManyFailures), reason)
				return ctx, nil, errors.New(reason)
			}
			return domain.WithActor(ctx, actor), nil, nil
		}
		if recheck != nil {
			watchCredential(ctx, actor, recheck, credentialRecheckInterval, func(reason string) {
				if len(reason) > 120 { // a close reason is at most 123 bytes
					reason = reason[:120]
				}
				socket.Close(ctx, socket.CloseUnauthenticated, reason)
			})
		}
		return domain.WithActor(ctx, actor), nil, nil
	}
}

// credentialRecheckInterval is how often a WebSocket's or SSE stream's
// credentials are checked again. A revoked key is seen at the first check
// after the key cache's entry is older than INVENTORY_KEY_CACHE_TTL (500 ms
// by default), so a stream ends at most that plus this interval after the
// revocation: within 0.9 s by default. A key lookup is served from the key
// cache and a checkout token is verified without the database (a few
// microseconds of HMAC), so this costs little per stream: 10,000 streams
// are 25,000 checks a second.
const credentialRecheckInterval = 400 * time.Millisecond

// watchCredential calls end, once, when the credentials a long-lived
// operation was opened with no longer authenticate actor: the key was
// revoked, the admin session ended, the checkout token expired. A WebSocket
// ends by closing with 4401, an SSE stream by ending its context
// (operationLimits). Checks that fail for want of a database keep the
// stream: the credentials may be fine. It stops when ctx ends. A timer, not
// a goroutine, waits between checks, so an idle stream costs no stack for
// it.
func watchCredential(ctx context.Context, actor domain.Actor, recheck auth.Recheck, every time.Duration, end func(reason string)) {
	var mu sync.Mutex
	var timer *time.Timer
	check := func() {
		if ctx.Err() != nil {
			return
		}
		now, err := recheck(ctx)
		if err == nil && (now.Role != actor.Role || now.Name != actor.Name) {
			reason := "credentials no longer valid"
			if now.TokenProblem != "" {
				reason = now.TokenProblem
			}
			end(reason)
			return
		}
		mu.Lock()
		timer.Reset(every)
		mu.Unlock()
	}
	mu.Lock()
	timer = time.AfterFunc(every, check)
	mu.Unlock()
	context.AfterFunc(ctx, func() {
		mu.Lock()
		timer.Stop()
		mu.Unlock()
	})
}
