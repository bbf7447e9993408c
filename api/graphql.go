package api

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"

	"inventory/auth"
	"inventory/domain"
	"inventory/graph"
	"inventory/resolvers"
	"inventory/socket"
)

// GraphQLConfig holds the limits of the GraphQL endpoint.
type GraphQLConfig struct {
	// MaxComplexity bounds a query's cost (each field costs 1 plus its
	// children, a list field times the rows its arguments ask for).
	MaxComplexity int
	// MaxTokens bounds a document's tokens: the parser gives up past it,
	// before building a tree of a hostile document.
	MaxTokens int
	// AnonymousConns is how many root fields of anonymous queries may run
	// (each on one request-pool connection) at once; 0 is no bound.
	AnonymousConns int
	// DocumentCacheBytes bounds the parsed-document cache (accepted
	// documents only).
	DocumentCacheBytes int64
	// MaxUploadBytes bounds a multipart request.
	MaxUploadBytes int64
	// KeepAlive is the WebSocket ping interval; a peer that does not answer
	// within two intervals is dropped.
	KeepAlive time.Duration
	// InitTimeout closes a WebSocket that sends no connection_init in time.
	InitTimeout time.Duration
	// Subscriptions caps live subscriptions per socket and per caller.
	Subscriptions SubscriptionCaps
}

// newGraphQLHandler builds the /graphql handler with explicit transports:
// GET and POST for queries and mutations, WebSocket (graphql-transport-ws and
// graphql-ws) and SSE for subscriptions, and multipart for uploads.
func newGraphQLHandler(r *resolvers.Resolver, authn *auth.Authenticator, cfg GraphQLConfig, origins []string, logger *slog.Logger) *handler.Server {
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: r, Complexity: complexity()}))
	srv.AddTransport(transport.Websocket{
		// A WebSocket upgrade is allowed from the server's own origin and
		// from the CORS origins (exact "scheme://host[:port]" patterns).
		Implementation:        socket.Implementation{CoderWebsocketImplementation: transport.CoderWebsocketImplementation{AcceptOptions: websocket.AcceptOptions{OriginPatterns: origins}}},
		InitTimeout:           cfg.InitTimeout,
		InitFunc:              authenticateSocket(authn),
		KeepAlivePingInterval: cfg.KeepAlive,
		PingPongInterval:      cfg.KeepAlive,
	})
	srv.AddTransport(transport.SSE{})
	srv.AddTransport(transport.Options{})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.AddTransport(transport.MultipartForm{MaxUploadSize: cfg.MaxUploadBytes, MaxMemory: uploadMemoryBytes})

	srv.SetParserTokenLimit(cfg.MaxTokens)
	docs := newDocumentCache(cfg.DocumentCacheBytes)
	srv.SetQueryCache(docs.queries())
	// Automatic persisted queries: a client sends a query's SHA-256 alone
	// (GET ?extensions={"persistedQuery":…}, cacheable by a CDN), and the
	// text once when told PersistedQueryNotFound. Each instance learns the
	// texts for itself.
	srv.Use(extension.AutomaticPersistedQuery{Cache: docs.texts()})
	srv.Use(extension.Introspection{})
	srv.Use(extension.FixedComplexityLimit(cfg.MaxComplexity))
	// After the complexity limit: only what passed it is cached.
	srv.Use(acceptDocuments{docs})
	srv.AroundOperations(operationName)
	srv.AroundRootFields(newAnonymousShare(cfg.AnonymousConns).around)
	srv.AroundOperations(newSubscriptionLimiter(cfg.Subscriptions).around)
	srv.SetErrorPresenter(presentError(logger))
	srv.SetRecoverFunc(recoverPanic(logger))
	return srv
}

// authenticateSocket authenticates a WebSocket on connection_init, from the
// payload's Authorization (browsers cannot set headers on a WebSocket), else
// the upgrade request's header. Every subscription needs a caller, so a socket
// without a usable token is closed with 4401 at once; one whose token could
// not be checked (database down) with 1013, so the client retries with it.
func authenticateSocket(authn *auth.Authenticator) transport.WebsocketInitFunc {
	return func(ctx context.Context, payload transport.InitPayload) (context.Context, *transport.InitPayload, error) {
		actor := domain.ActorFrom(ctx)
		recheck := auth.RecheckFrom(ctx)
		if header := payload.Authorization(); header != "" {
			recheck = func(ctx context.Context) (domain.Actor, error) { return authn.Authenticate(ctx, header) }
			var err error
			if actor, err = authn.Authenticate(ctx, header); err != nil {
				// The database did not answer: the token may be fine.
				return transport.WithWebsocketCloseCode(ctx, socket.CloseTryAgain), nil, errors.New("authentication unavailable, try again")
			}
		}
		if actor.Role == domain.RoleAnonymous {
			reason := "a token is required: send {\"Authorization\": \"Bearer <token>\"} in connection_init"
			if actor.TokenProblem != "" {
				reason = actor.TokenProblem
			}
			ctx = transport.AppendCloseReason(transport.WithWebsocketCloseCode(ctx, socket.CloseUnauthenticated), reason)
			return ctx, nil, errors.New(reason)
		}
		if recheck != nil {
			watchCredential(ctx, actor, recheck, socketRecheckInterval)
		}
		return domain.WithActor(ctx, actor), nil, nil
	}
}

// socketRecheckInterval is how often a WebSocket's credentials are checked
// again. A key lookup is served from the key cache (INVENTORY_KEY_CACHE_TTL)
// and a checkout token is verified without the database, so this costs
// little per socket.
const socketRecheckInterval = time.Second

// watchCredential closes the socket that ctx belongs to with 4401 once the
// credentials it was opened with no longer authenticate actor: the key was
// revoked, the admin session ended, the checkout token expired. Checks that
// fail for want of a database keep the socket: the credentials may be fine.
// It ends with the socket. A timer, not a goroutine, waits between checks, so
// an idle socket costs no stack for it.
func watchCredential(ctx context.Context, actor domain.Actor, recheck auth.Recheck, every time.Duration) {
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
			if len(reason) > 120 { // a close reason is at most 123 bytes
				reason = reason[:120]
			}
			socket.Close(ctx, socket.CloseUnauthenticated, reason)
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
