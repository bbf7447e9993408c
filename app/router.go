package app

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"inventory/api"
	"inventory/auth"
	"inventory/avail"
	"inventory/config"
	"inventory/cursor"
	"inventory/jobs"
	"inventory/metrics"
	"inventory/resolvers"
	"inventory/tracing"
)

// wireRouter builds the public HTTP handler: GraphQL with its resolvers,
// the callers' authentication, readiness, the admin pages and River's UI.
func wireRouter(ctx context.Context, cfg config.Config, db *pools, st stores, live *live, riverClient *river.Client[pgx.Tx],
	tokens *auth.CheckoutTokens, secrets [][]byte, tr *tracing.Tracing, logger *slog.Logger) (http.Handler, error) {
	riverUI, err := newRiverUI(ctx, riverClient, logger)
	if err != nil {
		return nil, err
	}
	// Bearer keys go through the key cache (revoking one takes effect
	// within KeyCacheTTL); admin sessions are read from the database on
	// every request, so sign-out holds at once on every instance.
	keys := &auth.KeyCache{Keys: st.api, MaxAge: cfg.KeyCacheTTL}
	live.metrics.WatchKeyReads(keys)
	sessions, err := auth.NewSessions(st.api, cfg.AdminSessionTTL, secrets...)
	if err != nil {
		return nil, err
	}
	cursors, err := cursor.New(secrets...)
	if err != nil {
		return nil, err
	}
	// Anonymous reads, availabilityChanged's included, share a bounded
	// part of the request pool; availabilityChanged reads memory first.
	anonymousShare := api.NewAnonymousShare(cfg.DBAnonymousConns)
	var answers api.AnswerValidator
	var liveMemory resolvers.AvailabilityMemory
	if live.copy != nil {
		answers, liveMemory = live.copy, live.copy
	}
	return api.NewRouter(api.Config{
		Answers: answers,
		Resolver: &resolvers.Resolver{Catalog: avail.Catalog{Catalog: st.api, Copy: live.copy}, Stock: live.stock, Reconciler: st.api,
			Reservations: metrics.Reservations{Reservations: st.api, Metrics: live.metrics}, Orders: metrics.Orders{Orders: st.api, Metrics: live.metrics}, UnitCodes: st.api,
			Waitlists: st.api, WaitlistFeed: st.api, WaitlistSignals: live.broker, WaitlistOverview: st.api,
			Events: st.api, Broker: live.broker, Tokens: tokens, FairUse: cfg.FairUse, Webhooks: st.api,
			Pages: st.api, Cursors: cursors,
			Live: st.api, LiveShare: anonymousShare, LiveMemory: liveMemory, PushInterval: cfg.AvailabilityPushInterval,
			WebhookTester: &jobs.WebhookTester{Store: st.api, AllowPrivate: cfg.WebhookAllowPrivate}},
		Authenticator: &auth.Authenticator{Keys: keys, Checkout: tokens, Sessions: sessions},
		Ready:         (&readiness{broker: live.broker, pool: db.api, logger: logger, metrics: live.metrics}).check,
		Logger:        logger,
		GraphQL: api.GraphQLConfig{MaxComplexity: cfg.MaxComplexity, MaxTokens: cfg.MaxQueryTokens, DocumentCacheBytes: cfg.QueryCacheBytes,
			AnswerCaps:     cfg.AnswerCaps,
			AnonymousShare: anonymousShare,
			MaxUploadBytes: cfg.MaxUploadBytes,
			KeepAlive:      cfg.WSKeepAlive, InitTimeout: cfg.WSInitTimeout, Subscriptions: cfg.Subscriptions, Fanout: live.fan},
		MaxBodyBytes:  cfg.MaxBodyBytes,
		BytesInFlight: api.NewBytesInFlight(cfg.MaxBytesInFlightPerIP),
		Metrics:       live.metrics,
		RiverUI:       riverUI,
		Deadlines: api.Deadlines{Read: cfg.HTTPReadTimeout, Write: cfg.HTTPWriteTimeout, Handle: cfg.RequestTimeout,
			Stall: cfg.Events.StallTimeout},
		TrustedProxies:    cfg.TrustedProxies,
		RateLimits:        cfg.RateLimits,
		SocketMaxInFlight: cfg.WSMaxInFlight,
		CORSOrigins:       cfg.CORSOrigins,
		CacheMaxAge:       cfg.CacheMaxAge,
		Tracing:           tr,
	}), nil
}
