// Package api is the HTTP surface: the chi router, the GraphQL handler with its
// transports and limits, the error presenter, and health endpoints. It holds no
// business logic; resolvers call the domain services.
package api
