package api

import (
	"log/slog"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"

	"inventory/graph"
	"inventory/resolvers"
)

// GraphQLConfig holds the limits of the GraphQL endpoint.
type GraphQLConfig struct {
	// MaxComplexity bounds a query's cost (each field costs 1 plus its children).
	MaxComplexity int
	// MaxUploadBytes bounds a multipart request.
	MaxUploadBytes int64
	// KeepAlive is the WebSocket ping interval, so dead peers are noticed.
	KeepAlive time.Duration
}

// newGraphQLHandler builds the /graphql handler with explicit transports:
// GET and POST for queries and mutations, WebSocket (graphql-transport-ws and
// graphql-ws) and SSE for subscriptions, and multipart for uploads.
func newGraphQLHandler(r *resolvers.Resolver, cfg GraphQLConfig, logger *slog.Logger) *handler.Server {
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: r}))
	srv.AddTransport(transport.Websocket{KeepAlivePingInterval: cfg.KeepAlive, InitTimeout: 10 * time.Second})
	srv.AddTransport(transport.SSE{})
	srv.AddTransport(transport.Options{})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.AddTransport(transport.MultipartForm{MaxUploadSize: cfg.MaxUploadBytes, MaxMemory: 1 << 20})

	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	srv.Use(extension.Introspection{})
	srv.Use(extension.FixedComplexityLimit(cfg.MaxComplexity))
	srv.SetErrorPresenter(presentError(logger))
	srv.SetRecoverFunc(recoverPanic(logger))
	return srv
}
