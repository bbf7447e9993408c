package api

import (
	"net/http"

	"inventory/domain"
)

// adminOnly serves next to admin keys only: 401 without a usable token, 403
// with another role's. It runs after the authenticator.
func adminOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch actor := domain.ActorFrom(r.Context()); actor.Role {
		case domain.RoleAdmin:
			next.ServeHTTP(w, r)
		case domain.RoleAnonymous:
			w.Header().Set("WWW-Authenticate", `Bearer realm="inventory"`)
			writeErrorCode(w, http.StatusUnauthorized, CodeUnauthenticated, "an admin key is required")
		default:
			writeErrorCode(w, http.StatusForbidden, CodeForbidden, "an admin key is required")
		}
	})
}
