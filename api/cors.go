package api

import (
	"net/http"

	"github.com/go-chi/cors"
)

// allowCrossOrigin lets the browser pages of the configured origins (a
// checkout SPA on the shop's own domain) call /graphql with their tokens:
// preflights are answered here, before authentication and rate limits, and
// answers carry Access-Control-Allow-Origin for those origins only. With no
// origins configured nothing is allowed: no CORS header is ever sent, and
// browsers keep other sites' pages from reading answers.
//
// Credentials (cookies) are never allowed: a page of an allowed origin sends
// its checkout token in the Authorization header, which needs no credentials
// mode, and a browser never lets it read an answer to a request that carried
// the admin's session cookie. The admin session's CSRF header is not among
// the allowed headers either, so no cross-origin page can act with an
// /admin sign-in.
func allowCrossOrigin(origins []string) func(http.Handler) http.Handler {
	if len(origins) == 0 {
		return func(next http.Handler) http.Handler { return next }
	}
	return cors.Handler(cors.Options{
		AllowedOrigins:   origins,
		AllowedMethods:   []string{http.MethodGet, http.MethodPost},
		AllowedHeaders:   []string{"Authorization", "Content-Type", "Accept"},
		ExposedHeaders:   []string{"Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"},
		AllowCredentials: false,
		MaxAge:           600,
	})
}
