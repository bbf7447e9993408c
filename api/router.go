package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"inventory/admin"
	"inventory/auth"
	"inventory/graphiql"
	"inventory/metrics"
	"inventory/resolvers"
	"inventory/socket"
	"inventory/tracing"
)

// Readiness reports why the server should not take traffic, or "" when ready.
type Readiness func(ctx context.Context) (string, error)

// Config is everything the router needs; main fills it.
type Config struct {
	Resolver      *resolvers.Resolver
	Authenticator *auth.Authenticator
	Ready         Readiness
	Logger        *slog.Logger
	GraphQL       GraphQLConfig
	// MaxBodyBytes bounds a JSON request body.
	MaxBodyBytes int64
	// BytesInFlight bounds the bytes of bodies and answers one address has
	// in flight; nil is no bound.
	BytesInFlight *BytesInFlight
	// Metrics is served at /metrics and times /graphql.
	Metrics *metrics.Metrics
	// RiverUI, if set, is River's job UI, served at /riverui/ to admin keys.
	RiverUI http.Handler
	// Deadlines bound plain requests (not subscriptions).
	Deadlines Deadlines
	// TrustedProxies are the CIDR prefixes whose X-Forwarded-For is believed
	// (clientIP); empty: the TCP peer is the client.
	TrustedProxies []string
	// RateLimits are the per-caller budgets: every request on every path,
	// every operation on a WebSocket, and failed authentications per
	// client address.
	RateLimits RateLimits
	// SocketMaxInFlight bounds the queries and mutations in flight on one
	// WebSocket (INVENTORY_WS_MAX_IN_FLIGHT); 0 is no bound.
	SocketMaxInFlight int
	// CORSOrigins are the origins ("https://shop.example") whose pages may
	// call /graphql, over HTTP and WebSocket; none by default.
	CORSOrigins []string
	// Answers, if set, validates serialized answers of anonymous GETs made
	// from the in-memory availability copy, which are then reused (see
	// answerCache).
	Answers AnswerValidator
	// CacheMaxAge is the max-age of anonymous GET queries' answers
	// (cacheHeaders); whole seconds.
	CacheMaxAge time.Duration
	// Tracing, when on, traces /graphql requests and their operations
	// (traceRequests, operationTracing); nil is off.
	Tracing *tracing.Tracing
}

// NewRouter returns the server's whole HTTP surface.
func NewRouter(cfg Config) http.Handler {
	r := chi.NewRouter()
	r.Use(cfg.Deadlines.middleware, middleware.RequestID, clientIP(cfg.TrustedProxies), middleware.Recoverer)

	budgets := newBudgets(cfg.RateLimits)
	guard := newAuthGuard(cfg.Authenticator, cfg.RateLimits)
	// Every path is authenticated (behind the failed-authentication guard)
	// and spends its caller's budget; /graphql's middleware does both in an
	// order of its own below.
	r.Group(func(r chi.Router) {
		r.Use(guard.middleware, budgets.limitRequests)
		r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		r.Get("/readyz", readyz(sharedReadiness(cfg.Ready, readinessTTL)))
		// /metrics on the public listener is for admin keys only; a scraper
		// without one uses INVENTORY_METRICS_ADDR, a listener of its own.
		r.With(adminOnly).Handle("/metrics", cfg.Metrics.Handler())
		if cfg.RiverUI != nil {
			r.With(adminOnly).Handle("/riverui/*", cfg.RiverUI)
			r.Get("/riverui", http.RedirectHandler("/riverui/", http.StatusMovedPermanently).ServeHTTP)
		}
		// The operations dashboard: the page (sign-in form unless admin), its
		// embedded assets, and the key-for-cookie exchange.
		if cfg.Authenticator.Sessions != nil {
			r.Get("/admin", admin.Page)
			r.Get("/admin/", http.RedirectHandler("/admin", http.StatusMovedPermanently).ServeHTTP)
			r.Handle("/admin/assets/*", http.StripPrefix("/admin/assets/", admin.Assets()))
			r.Handle("/admin/session", guard.signIns(admin.SessionHandler(cfg.Authenticator.Sessions, cfg.Logger)))
		}
		r.Get("/", graphiql.Handler("/graphql", "/graphiql/"))
		r.Get("/favicon.ico", favicon)
		r.Handle("/graphiql/*", http.StripPrefix("/graphiql/", graphiql.Assets()))
	})
	// Unknown paths and methods too.
	r.NotFound(guard.middleware(budgets.limitRequests(http.NotFoundHandler())).ServeHTTP)
	r.MethodNotAllowed(guard.middleware(budgets.limitRequests(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusMethodNotAllowed)
	}))).ServeHTTP)

	cpu := newAnonymousCPU()
	gql := newGraphQLHandler(cfg.Resolver, guard, cfg.GraphQL, cfg.CORSOrigins, cfg.Logger)
	// What limits an HTTP request limits each operation on a WebSocket and
	// SSE too; inside it only the fan-out.
	limits := &operationLimits{budgets: budgets, maxInFlight: cfg.SocketMaxInFlight, timeout: cfg.Deadlines.Handle}
	if cfg.Tracing != nil && cfg.Tracing.Enabled {
		// First, so that an operation's span covers its waits for limits.
		gql.Use(operationTracing{tracer: cfg.Tracing.Provider.Tracer(tracing.ScopeName)})
	}
	gql.Use(limits)
	gql.AroundOperations(limits.around)
	gql.AroundOperations(cpu.around)
	// Inside every limit: availability from memory without the executor
	// (fastAvailability, queries only), then innermost the subscription
	// fan-out (subscriptions only).
	if mem, ok := cfg.Answers.(AvailabilityMemory); ok {
		gql.AroundOperations(fastAvailability{mem}.around)
	}
	useFanout(gql, cfg.GraphQL.Fanout)
	r.Group(func(r chi.Router) {
		r.Use(allowCrossOrigin(cfg.CORSOrigins), cfg.Metrics.Instrument, guard.middleware, traceRequests(cfg.Tracing), logRequests(cfg.Logger), socket.Middleware)
		r.With(refuseUnsupportedRequests, cacheHeaders(cfg.CacheMaxAge), cfg.BytesInFlight.middleware, limitBody(cfg.MaxBodyBytes, cfg.GraphQL.MaxUploadBytes, cpu), budgets.rateLimit,
			refuseForeignSocketOrigins(cfg.CORSOrigins, cfg.Logger), newAnswerCache(cfg.Answers).middleware).Handle("/graphql", gql)
	})
	return r
}

func readyz(ready Readiness) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		reason, err := ready(ctx)
		if err != nil {
			reason = "database unreachable"
		}
		if reason != "" {
			http.Error(w, "not ready: "+reason, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	}
}
