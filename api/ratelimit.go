package api

import (
	"fmt"
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
// availability reads.
type RateLimits struct {
	Window    time.Duration
	Anonymous Budget // per client IP (IPv6 by /64)
	Checkout  Budget // per checkout token's checkoutId
	Key       Budget // per admin or service key: the shop's own backends, 0 (off) by default
}

// rateLimit counts every /graphql request against its caller's budget and
// answers 429 with Retry-After once it is spent. It runs after the
// authenticator (the caller is known) and after limitBody (the body is
// read, so the operation's kind is known), and before gqlgen does anything.
func rateLimit(cfg RateLimits) func(http.Handler) http.Handler {
	type limiters struct{ reads, writes *httprate.RateLimiter }
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
	byRole := map[domain.Role]limiters{
		domain.RoleAnonymous: newLimiters(cfg.Anonymous),
		domain.RoleCheckout:  newLimiters(cfg.Checkout),
		domain.RoleService:   newLimiters(cfg.Key),
		domain.RoleAdmin:     newLimiters(cfg.Key),
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			actor := domain.ActorFrom(r.Context())
			l := byRole[actor.Role]
			limiter := l.reads
			if requestWrites(r.Context()) {
				limiter = l.writes
			}
			if limiter != nil && limiter.RespondOnLimit(w, r, callerKey(r, actor)) {
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// callerKey names whose budget a request spends: the key, the checkout, or
// the client's address (as resolved from trusted proxies, clientIP).
func callerKey(r *http.Request, a domain.Actor) string {
	switch a.Role {
	case domain.RoleCheckout:
		return "checkout:" + a.CheckoutID
	case domain.RoleService, domain.RoleAdmin:
		return "key:" + a.Name
	}
	return "ip:" + httprate.CanonicalizeIP(middleware.GetClientIP(r.Context()))
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
	return middleware.ClientIPFromXFF(trustedProxies...)
}
