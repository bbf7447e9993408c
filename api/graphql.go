package api

import (
	"log/slog"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"

	"inventory/fanout"
	"inventory/graph"
	"inventory/resolvers"
	"inventory/socket"
)

// GraphQLConfig holds the limits of the GraphQL endpoint.
type GraphQLConfig struct {
	// MaxComplexity bounds a query's cost (each field costs 1 plus its
	// children, a list field times the rows its arguments ask for).
	MaxComplexity int
	// AnswerCaps bound an answer's bytes, by caller: checked on the
	// document before it runs and on the answer before it is written.
	AnswerCaps AnswerCaps
	// MaxTokens bounds a document's tokens: the parser gives up past it,
	// before building a tree of a hostile document.
	MaxTokens int
	// AnonymousShare bounds how many root fields of anonymous queries may
	// run (each on one request-pool connection) at once; nil is no bound.
	AnonymousShare *AnonymousShare
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
	// Fanout groups identical subscriptions so each runs once; nil makes
	// one with the default limits.
	Fanout *fanout.Registry
}

// newGraphQLHandler builds the /graphql handler with explicit transports:
// GET and POST for queries and mutations, WebSocket (graphql-transport-ws and
// graphql-ws) and SSE for subscriptions, and multipart for uploads.
func newGraphQLHandler(r *resolvers.Resolver, authn *authGuard, cfg GraphQLConfig, origins []string, logger *slog.Logger) *handler.Server {
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: r, Complexity: complexity()}))
	srv.AddTransport(transport.Websocket{
		// A WebSocket upgrade is allowed from the server's own origin and
		// from the CORS origins (exact "scheme://host[:port]" patterns).
		// The keep-alive (graphql-ws's ka, graphql-transport-ws's ping and
		// pong deadline) runs on a timer in socket, not on a goroutine of
		// gqlgen's per socket: its intervals stay 0.
		Implementation: socket.Implementation{AcceptOptions: websocket.AcceptOptions{OriginPatterns: origins}, KeepAlive: cfg.KeepAlive},
		InitTimeout:    cfg.InitTimeout,
		InitFunc:       authenticateSocket(authn, newAnonymousSockets(cfg.Subscriptions.AnonymousSocketsPerIP)),
	})
	srv.AddTransport(transport.SSE{})
	srv.AddTransport(transport.Options{})
	// GET and POST answer as the GraphQL over HTTP spec says (overHTTP):
	// the media type Accept prefers, and its status codes.
	srv.AddTransport(newOverHTTP(func(h map[string][]string) graphql.Transport { return transport.GET{ResponseHeaders: h} }))
	srv.AddTransport(newOverHTTP(func(h map[string][]string) graphql.Transport { return transport.POST{ResponseHeaders: h} }))
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
	// Before the complexity limit: gqlgen's walk expands every fragment
	// spread, so a document that expands past it must not reach it.
	srv.Use(fieldExpansion{maxFields: int64(cfg.MaxComplexity)})
	srv.Use(extension.FixedComplexityLimit(cfg.MaxComplexity))
	srv.Use(&answerSize{caps: cfg.AnswerCaps})
	// After the complexity limit: only what passed it is cached.
	srv.Use(acceptDocuments{docs})
	srv.Use(fanout.OperationIDs{})
	srv.AroundOperations(operationName)
	srv.AroundOperations(refuseUnknownCredentials)
	srv.AroundResponses(capAnswers(cfg.AnswerCaps))
	srv.AroundRootFields(cfg.AnonymousShare.around)
	srv.AroundRootFields(sequencedFields)
	srv.AroundOperations(newSubscriptionLimiter(cfg.Subscriptions).around)
	srv.SetErrorPresenter(presentError(logger))
	srv.SetRecoverFunc(recoverPanic(logger))
	return srv
}

// useFanout makes subscriptions with the same document, variables and
// caller scope run once for all their subscribers (fanout). It must be the
// last operation interceptor added: gqlgen nests each one inside those
// added before it, and everything that counts, limits or watches one
// subscriber (the caps, the budgets, the credential checks) must stay
// outside the shared execution.
func useFanout(srv *handler.Server, fan *fanout.Registry) {
	if fan == nil {
		fan = fanout.New(fanout.Config{Report: resolvers.ReportSubscriptionEnd})
	}
	srv.AroundOperations(fan.AroundOperations)
}
