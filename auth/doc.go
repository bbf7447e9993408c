// Package auth turns a bearer token into a domain.Actor and decides what that
// actor may do. It is the one place where roles are compared: resolvers ask
// Authorize and never look at a role themselves.
package auth
