package api

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"
	"github.com/vektah/gqlparser/v2/ast"

	"inventory/auth"
	"inventory/domain"
	"inventory/graph"
	"inventory/resolvers"
	"inventory/socket"
)

// GraphQLConfig holds the limits of the GraphQL endpoint.
type GraphQLConfig struct {
	// MaxComplexity bounds a query's cost (each field costs 1 plus its children).
	MaxComplexity int
	// MaxUploadBytes bounds a multipart request.
	MaxUploadBytes int64
	// KeepAlive is the WebSocket ping interval; a peer that does not answer
	// within two intervals is dropped.
	KeepAlive time.Duration
	// InitTimeout closes a WebSocket that sends no connection_init in time.
	InitTimeout time.Duration
}

// newGraphQLHandler builds the /graphql handler with explicit transports:
// GET and POST for queries and mutations, WebSocket (graphql-transport-ws and
// graphql-ws) and SSE for subscriptions, and multipart for uploads.
func newGraphQLHandler(r *resolvers.Resolver, authn *auth.Authenticator, cfg GraphQLConfig, origins []string, logger *slog.Logger) *handler.Server {
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: r}))
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

	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	srv.Use(extension.Introspection{})
	srv.Use(extension.FixedComplexityLimit(cfg.MaxComplexity))
	srv.AroundOperations(operationName)
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
		if header := payload.Authorization(); header != "" {
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
		return domain.WithActor(ctx, actor), nil, nil
	}
}
