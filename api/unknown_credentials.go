package api

import (
	"context"

	"github.com/99designs/gqlgen/graphql"

	"inventory/domain"
)

// refuseUnknownCredentials answers every operation whose caller presented a
// credential that did not authenticate (an unknown or revoked key, a forged
// or garbled token) with UNAUTHENTICATED, saying why, before it runs. Were
// such a caller served as anonymous wherever anonymous may read, a
// storefront whose key was revoked would get 200s and never learn it. An
// expired checkout token is not such a credential: it was genuine, and a
// storefront tab left open past it keeps reading the catalog as anonymous.
func refuseUnknownCredentials(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	if actor := domain.ActorFrom(ctx); failedAuthentication(actor) {
		return refuseWith(CodeUnauthenticated, "authentication required: "+actor.TokenProblem)
	}
	return next(ctx)
}
