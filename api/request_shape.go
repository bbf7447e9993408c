package api

import (
	"mime"
	"net/http"
)

// graphQLMethods are the methods /graphql answers: GET (queries in the URL,
// and the WebSocket upgrade), POST (JSON, SSE and uploads), and OPTIONS
// (CORS preflight).
const graphQLMethods = "GET, POST, OPTIONS"

// refuseUnsupportedRequests answers a request no GraphQL transport takes
// with what to send instead, before its body is read: a method other than
// graphQLMethods is 405 with Allow, a POST whose Content-Type is neither
// JSON nor a multipart upload is 415. gqlgen's own answer to both is
// "transport not supported", which does not tell a newcomer's curl that
// it lacks -H 'Content-Type: application/json'.
func refuseUnsupportedRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodOptions:
		case http.MethodPost:
			declared := r.Header.Get("Content-Type")
			mediaType, _, _ := mime.ParseMediaType(declared)
			if mediaType != "application/json" && mediaType != "multipart/form-data" {
				got := "no Content-Type"
				if declared != "" {
					got = "Content-Type " + quoteCallerValue(declared)
				}
				w.Header().Set("Connection", "close") // the body is not read
				writeError(w, http.StatusUnsupportedMediaType, "a POST to /graphql is JSON: send Content-Type: application/json (multipart/form-data for an upload); this request has "+got)
				return
			}
		default:
			w.Header().Set("Allow", graphQLMethods)
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusMethodNotAllowed, "/graphql answers "+graphQLMethods+", not "+quoteCallerValue(r.Method))
			return
		}
		next.ServeHTTP(w, r)
	})
}
