package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"inventory/domain"
)

// uploadMemoryBytes is how much of an upload gqlgen's multipart transport
// keeps in memory (MultipartForm.MaxMemory). gqlgen decides by Content-Length
// alone: a body that declares less, or nothing at all (chunked), is read into
// memory whole. So a chunked upload may be at most this large; bigger files
// must declare their length and are then spooled to a temporary file.
const uploadMemoryBytes = 1 << 20

// limitBody bounds every /graphql body before a byte of it is read, from what
// the caller is (the authenticator runs first) and what it declares:
//
//   - multipart uploads are for admins only (importCodes is the one mutation
//     that takes a file): anyone else is refused at the header, 401 without a
//     usable token and 403 with one, and the body is never read;
//   - an admin's upload may be maxUpload bytes if it declares Content-Length,
//     and uploadMemoryBytes if it is chunked, since gqlgen would hold a chunked
//     body in memory;
//   - every other body may be max bytes, whatever Content-Length says; JSON
//     bodies that are not well-formed get 400.
//
// Refusals use GraphQL's error shape, never echoing the body.
func limitBody(max, maxUpload int64, cpu *anonymousCPU) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
			limit := max
			if mediaType == "multipart/form-data" {
				if status, code, msg := uploadRefusal(domain.ActorFrom(r.Context())); status != 0 {
					w.Header().Set("Connection", "close") // do not drain the refused body
					writeErrorCode(w, status, code, msg)
					return
				}
				limit = maxUpload
				if r.ContentLength < 0 {
					limit = min(maxUpload, uploadMemoryBytes)
				}
			}
			if r.ContentLength > limit {
				w.Header().Set("Connection", "close")
				writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", limit))
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			if r.Method == http.MethodPost && mediaType == "application/json" {
				reserve := limit
				if r.ContentLength >= 0 {
					reserve = r.ContentLength
				}
				if !takeInFlight(r.Context(), reserve) {
					w.Header().Set("Connection", "close") // do not read the refused body
					w.Header().Set("Retry-After", "1")
					writeErrorCode(w, http.StatusTooManyRequests, CodeRateLimited, inFlightRefusal(r.Context()))
					return
				}
				body, err := io.ReadAll(r.Body)
				var tooLarge *http.MaxBytesError
				switch {
				case errors.As(err, &tooLarge):
					writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", limit))
					return
				case err != nil:
					// The client stopped sending (or the read deadline passed).
					// The write deadline may be as near: give the refusal
					// a moment of its own to be written.
					_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(5 * time.Second))
					w.Header().Set("Connection", "close")
					writeError(w, http.StatusRequestTimeout, "the request body did not arrive in time")
					return
				}
				// gqlgen's own decoding errors quote the whole body back
				// (variables, tokens pasted into them and all); refuse
				// malformed JSON and wrong shapes first, in words that quote
				// nothing.
				release, err := cpu.acquire(r.Context())
				if err != nil {
					writeErrorCode(w, http.StatusServiceUnavailable, CodeInternal, "took too long waiting for the anonymous share of this instance's CPU; nothing changed")
					return
				}
				params, msg := decodeParams(body)
				if msg == "" {
					msg = variablesRefusal(r.Context(), params.variables)
				}
				if msg == "" {
					if name := longName(params.query); name != "" {
						release()
						writeErrorCode(w, http.StatusBadRequest, "COMPLEXITY_LIMIT_EXCEEDED", longNameRefusal(name))
						return
					}
				}
				release()
				if msg != "" {
					writeError(w, http.StatusBadRequest, msg)
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				r = r.WithContext(withWrites(r.Context(), operationWrites(params.query, params.operationName)))
				var done func()
				w, r, done = streamDeadlines(w, r, operationSubscribes(params.query, params.operationName))
				defer done()
			} else if mediaType == "multipart/form-data" {
				r = r.WithContext(withWrites(r.Context(), true)) // importCodes
			} else if r.Method == http.MethodGet {
				q := r.URL.Query()
				if msg := variablesRefusal(r.Context(), []byte(q.Get("variables"))); msg != "" {
					writeError(w, http.StatusBadRequest, msg)
					return
				}
				if name := longName(q.Get("query")); name != "" {
					writeErrorCode(w, http.StatusBadRequest, "COMPLEXITY_LIMIT_EXCEEDED", longNameRefusal(name))
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// uploadRefusal says why actor may not send a multipart upload (HTTP status,
// extensions.code and message), or status 0 when it may.
func uploadRefusal(actor domain.Actor) (int, string, string) {
	switch {
	case actor.Role == domain.RoleAdmin:
		return 0, "", ""
	case actor.Role == domain.RoleAnonymous && actor.TokenProblem != "":
		return http.StatusUnauthorized, CodeUnauthenticated, "uploads need an admin token: " + actor.TokenProblem
	case actor.Role == domain.RoleAnonymous:
		return http.StatusUnauthorized, CodeUnauthenticated, "uploads need an admin token"
	default:
		return http.StatusForbidden, CodeForbidden, "uploads are for admin keys only"
	}
}

func writeError(w http.ResponseWriter, status int, message string) {
	writeErrorCode(w, status, CodeBadRequest, message)
}

func writeErrorCode(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"errors": []map[string]any{{"message": message, "extensions": map[string]string{"code": code}}},
	})
}

// requestParams is what the rate limiter needs of a GraphQL request, and
// its variables as sent (variablesRefusal).
type requestParams struct {
	query, operationName string
	variables            []byte
}

// decodeParams reads a GraphQL JSON request, or says what is wrong with it:
// not JSON at all, or not its shape (one object; query and operationName
// strings; variables and extensions objects). Batched arrays are not
// supported. One decoding checks both.
//
// The fields are decoded into a struct, as gqlgen decodes them (so matched
// as it matches them, case-insensitively), not a map: this runs for every
// POST, and a map's allocations are a noticeable share of an availability
// POST's server CPU.
func decodeParams(body []byte) (requestParams, string) {
	var params struct{ Query, OperationName, Variables, Extensions json.RawMessage }
	var syntax *json.SyntaxError
	if err := json.Unmarshal(body, &params); errors.As(err, &syntax) {
		return requestParams{}, "request body is not valid JSON"
	} else if err != nil {
		return requestParams{}, "the request body must be one JSON object {\"query\": …, \"variables\": {…}}; batched arrays are not supported"
	}
	for _, f := range []struct {
		name string
		v    json.RawMessage
		want byte
	}{{"query", params.Query, '"'}, {"operationName", params.OperationName, '"'}, {"variables", params.Variables, '{'}, {"extensions", params.Extensions, '{'}} {
		v := bytes.TrimSpace(f.v)
		if len(v) == 0 || string(v) == "null" {
			continue
		}
		if v[0] != f.want {
			kind := "a string"
			if f.want == '{' {
				kind = "an object"
			}
			return requestParams{}, f.name + " must be " + kind
		}
	}
	p := requestParams{variables: params.Variables}
	// Both are JSON strings when present (checked above): cannot fail.
	_ = json.Unmarshal(params.Query, &p.query)
	_ = json.Unmarshal(params.OperationName, &p.operationName)
	return p, ""
}
