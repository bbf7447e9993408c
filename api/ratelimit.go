package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/go-chi/httprate"

	"inventory/domain"
)

// CodeRateLimited is extensions.code of a 429.
const CodeRateLimited = "RATE_LIMITED"

// Budget is how many requests one caller may make per window; 0 is no limit.
type Budget struct{ Reads, Writes int }

// RateLimits are the request budgets per caller and window, each instance
// counting its own requests. Reads (queries, subscriptions, and anything
// that is not a mutation) and writes (mutations) are separate budgets, so a
// bot's mutations from a storefront's address cannot starve its
// availability reads. Every operation spends them, whatever carries it: an
// HTTP request, an SSE stream, or one message on a WebSocket; so does every
// request to a path other than /graphql (GET and HEAD as reads).
type RateLimits struct {
	Window    time.Duration
	Anonymous Budget // per client IP (IPv6 by /64)
	Checkout  Budget // per checkout token's checkoutId
	Key       Budget // per admin or service key: the shop's own backends, 0 (off) by default
	// AuthFailures is how many requests with a token that does not
	// authenticate one client IP may send per window; past it every request
	// from the address that carries a token is refused (429, or close 4429
	// on a WebSocket) before the token is looked up. 0 is no limit.
	AuthFailures int
}

// budgets are the limiters behind RateLimits, one pair per role, shared by
// every transport so that a caller has one budget however it connects.
type budgets struct {
	byRole map[domain.Role]limiters
}

type limiters struct{ reads, writes *httprate.RateLimiter }

func newBudgets(cfg RateLimits) *budgets {
	newLimiters := func(b Budget) limiters {
		var l limiters
		if b.Reads > 0 {
			l.reads = httprate.NewRateLimiter(b.Reads, cfg.Window, httprate.WithLimitHandler(tooManyRequests))
		}
		if b.Writes > 0 {
			l.writes = httprate.NewRateLimiter(b.Writes, cfg.Window, httprate.WithLimitHandler(tooManyRequests))
		}
		return l
	}
	return &budgets{byRole: map[domain.Role]limiters{
		domain.RoleAnonymous: newLimiters(cfg.Anonymous),
		domain.RoleCheckout:  newLimiters(cfg.Checkout),
		domain.RoleService:   newLimiters(cfg.Key),
		domain.RoleAdmin:     newLimiters(cfg.Key),
	}}
}

// limiter is the budget an operation of actor spends; nil is no limit.
func (b *budgets) limiter(actor domain.Actor, writes bool) *httprate.RateLimiter {
	l := b.byRole[actor.Role]
	if writes {
		return l.writes
	}
	return l.reads
}

// spend counts one operation that arrived other than as an HTTP request (a
// WebSocket message) against its caller's budget, and says whether it may
// run; retryAfter is the window in seconds when it may not.
func (b *budgets) spend(ctx context.Context, writes bool) (ok bool, retryAfter string) {
	actor := domain.ActorFrom(ctx)
	l := b.limiter(actor, writes)
	if l == nil {
		return true, ""
	}
	w := headersOnly{http.Header{}}
	if l.OnLimit(w, (&http.Request{}).WithContext(ctx), callerKey(ctx, actor)) {
		return false, w.h.Get("Retry-After")
	}
	return true, ""
}

// headersOnly is the http.ResponseWriter httprate sets its headers on when
// the operation is not an HTTP request.
type headersOnly struct{ h http.Header }

func (w headersOnly) Header() http.Header       { return w.h }
func (headersOnly) Write(b []byte) (int, error) { return len(b), nil }
func (headersOnly) WriteHeader(int)             {}

// rateLimit counts every /graphql request against its caller's budget and
// answers 429 with Retry-After once it is spent. It runs after the
// authenticator (the caller is known) and after limitBody (the body is
// read, so the operation's kind is known), and before gqlgen does anything.
// A WebSocket's upgrade spends one read; each operation on it spends its own
// (operationLimits).
func (b *budgets) rateLimit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		actor := domain.ActorFrom(r.Context())
		limiter := b.limiter(actor, requestWrites(r.Context()))
		if limiter != nil && limiter.RespondOnLimit(w, r, callerKey(r.Context(), actor)) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limitRequests counts a request to any other path (the dashboard, its
// sign-in, /metrics, River UI, GraphiQL, the probes) against its caller's
// budget: reads for GET, HEAD and OPTIONS, writes otherwise. It runs after
// the authenticator.
func (b *budgets) limitRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		actor := domain.ActorFrom(r.Context())
		writes := r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions
		limiter := b.limiter(actor, writes)
		if limiter != nil && limiter.RespondOnLimit(w, r, callerKey(r.Context(), actor)) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// callerKey names whose budget a request spends: the key, the checkout, or
// the client's address (as resolved from trusted proxies, clientIP).
func callerKey(ctx context.Context, a domain.Actor) string {
	switch a.Role {
	case domain.RoleCheckout:
		return "checkout:" + a.CheckoutID
	case domain.RoleService, domain.RoleAdmin:
		return "key:" + a.Name
	}
	return ipKey(ctx)
}

// ipKey is the budget key of the request's client address: IPv6 by /64,
// since one subscriber usually holds a whole /64.
//
// A request from a trusted proxy that names no client (its own health
// check, or a header that is not an address) spends the proxy's budget:
// under one empty key, every such request of every proxy shared one
// budget, and a tiny one (a test's, five reads) was spent by a load
// balancer's first readiness probes, after which it saw 429 until its
// deadline.
func ipKey(ctx context.Context) string {
	if ip := middleware.GetClientIP(ctx); ip != "" {
		return "ip:" + httprate.CanonicalizeIP(ip)
	}
	peer, _ := ctx.Value(peerKey{}).(string)
	if host, _, err := net.SplitHostPort(peer); err == nil {
		peer = host
	}
	return "ip:proxy " + peer
}

func tooManyRequests(w http.ResponseWriter, r *http.Request) {
	// httprate has set Retry-After (the window, in seconds) and the
	// X-RateLimit-* headers.
	writeErrorCode(w, http.StatusTooManyRequests, CodeRateLimited,
		fmt.Sprintf("too many requests from this caller; retry after %s seconds", w.Header().Get("Retry-After")))
}

// clientIP resolves each request's client address for rate limits and logs:
// the TCP peer, unless the peer is one of the trusted proxies, in which case
// the rightmost X-Forwarded-For entry that is not a trusted proxy. A client
// that reaches the server directly cannot choose its address.
func clientIP(trustedProxies []string) func(http.Handler) http.Handler {
	if len(trustedProxies) == 0 {
		return middleware.ClientIPFromRemoteAddr
	}
	xff := middleware.ClientIPFromXFF(trustedProxies...)
	return func(next http.Handler) http.Handler {
		h := xff(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), peerKey{}, r.RemoteAddr)))
		})
	}
}

// peerKey holds the TCP peer of a request that came through a trusted
// proxy: the budget of a request whose client it could not name.
type peerKey struct{}
