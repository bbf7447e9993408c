package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// limitBody refuses bodies over their limit with 413 (maxUpload for multipart
// uploads, max for everything else), and JSON bodies that are not well-formed
// with 400, both in GraphQL's error shape with extensions.code BAD_REQUEST,
// before gqlgen sees them.
func limitBody(max, maxUpload int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
			max := max
			if mediaType == "multipart/form-data" {
				max = maxUpload
			}
			if r.ContentLength > max {
				writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", max))
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, max)
			if r.Method == http.MethodPost && mediaType == "application/json" {
				body, err := io.ReadAll(r.Body)
				if err != nil {
					writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", max))
					return
				}
				if !json.Valid(body) {
					writeError(w, http.StatusBadRequest, "request body is not valid JSON")
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			next.ServeHTTP(w, r)
		})
	}
}

func writeError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"errors": []map[string]any{{"message": message, "extensions": map[string]string{"code": CodeBadRequest}}},
	})
}
