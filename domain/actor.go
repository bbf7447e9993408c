package domain

import "context"

// Role is what kind of caller is acting.
type Role string

// Roles, from least to most trusted. See docs/api.md, "Auth".
const (
	RoleAnonymous Role = "ANONYMOUS"
	RoleCheckout  Role = "CHECKOUT" // bound to one checkoutId
	RoleService   Role = "SERVICE"  // the checkout backend
	RoleAdmin     Role = "ADMIN"
)

// Actor is the authenticated caller of one request.
type Actor struct {
	Role       Role
	Name       string // API key name, or "checkout:<id>"
	CheckoutID string // set for RoleCheckout only
	// TokenProblem explains why a presented token was not accepted; the caller
	// then acts anonymously, and is told why if it tries something that needs a
	// token.
	TokenProblem string
}

// Anonymous is the caller that presented no usable token.
var Anonymous = Actor{Role: RoleAnonymous, Name: "anonymous"}

type actorKey struct{}

// WithActor returns a context carrying the request's caller.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the request's caller; anonymous if none was recorded.
func ActorFrom(ctx context.Context) Actor {
	if a, ok := ctx.Value(actorKey{}).(Actor); ok {
		return a
	}
	return Anonymous
}

// APIKey is a stored admin or service key; the secret itself is never stored.
type APIKey struct {
	Name string
	Role Role
}
