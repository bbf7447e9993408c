package api

import (
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// refuseForeignSocketOrigins answers a WebSocket upgrade that a page of
// another origin started with 403, before gqlgen's transport sees it. A
// browser sends any site's page's Origin, so a page of evil.example could
// otherwise open a socket to us; only the server's own pages and the CORS
// origins may.
//
// The WebSocket library makes the same check (its OriginPatterns stay set,
// as a second line), but a refusal there reaches gqlgen as an error that it
// prints with the standard library's logger, outside the structured log and
// at no level, so every refused page (and every negative test) would print
// a line that looks like a failure. A refusal is the caller's mistake, not
// ours, so it is logged at DEBUG, and the request log records its 403 as it
// does every answer.
func refuseForeignSocketOrigins(origins []string, logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// gqlgen's WebSocket transport takes any request with an
			// Upgrade header (transport.Websocket.Supports).
			if r.Header.Get("Upgrade") == "" || socketOriginAllowed(r, origins) {
				next.ServeHTTP(w, r)
				return
			}
			logger.DebugContext(r.Context(), "websocket refused: origin not allowed", "origin", r.Header.Get("Origin"))
			http.Error(w, "websocket refused: pages of origin "+quoteCallerValue(r.Header.Get("Origin"))+
				" may not open a socket here (allowed: this server's own pages and INVENTORY_CORS_ORIGINS)", http.StatusForbidden)
		})
	}
}

// socketOriginAllowed says whether r may open a WebSocket: it carries no
// Origin (not a browser, which always sends one, so no page of another site
// is acting through it), its Origin is this server's own host, or it is one
// of the configured origins (exact "scheme://host[:port]", as config checks).
func socketOriginAllowed(r *http.Request, origins []string) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, o := range origins {
		if strings.EqualFold(origin, o) {
			return true
		}
	}
	return false
}

// quoteCallerValue quotes what a caller sent (an Origin, a Content-Type, a
// method) for an answer, cut to a length that says what was refused
// without echoing a long header back.
func quoteCallerValue(o string) string {
	const maxShown = 100
	if len(o) > maxShown {
		o = strings.ToValidUTF8(o[:maxShown], "") + "…"
	}
	return strconv.Quote(o)
}
