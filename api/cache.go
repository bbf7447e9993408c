package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"

	"inventory/auth"
	"inventory/domain"
)

// maxCachedResponseBytes is the largest GET answer that cacheHeaders holds
// back to give an ETag. A larger one is passed through as it is written,
// marked no-store: its errors, if any, cannot be seen before its status is
// sent.
const maxCachedResponseBytes = 1 << 20

// cacheHeaders makes anonymous GET queries (availability behind a CDN, with
// automatic persisted queries) cacheable, and everything else not:
//
//   - a GET answered 200 with data and no errors, to a caller that sent
//     neither an Authorization header nor the session cookie (and so is
//     anonymous, with no token problem), gets Cache-Control: public,
//     max-age=maxAge and a strong ETag; If-None-Match that matches it
//     (weak comparison, or *) is answered 304 with no body;
//   - a GET by any other caller gets Cache-Control: private, no-store;
//   - a GET answered with an error (a GraphQL error, PersistedQueryNotFound,
//     400, 413, 429, …) gets Cache-Control: no-store;
//   - every GET answer carries Vary: Accept, Authorization, Cookie (Accept
//     picks the media type, responseMediaType).
//
// The ETag is the SHA-256 of the answer's body and Content-Type: nothing
// moved, same bytes, same ETag (on every instance, with no extra query, and
// whether the instance's in-memory copy or the database answered), and any
// change to a balance read changes the bytes. When every root field was
// availability answered from the in-memory copy (which knows exactly which
// events it reflects), the answer also carries X-Stock-Seq: the highest
// stock event seq of the balances answered, so a client or CDN can order two
// answers. It is not put in the ETag: an answer read from the database (the
// copy stale, loading, or not yet knowing a new SKU) has no exact seq (a
// change commits before the relay gives it one), so the same bytes would get
// two tags and revalidation would fail for nothing; and a balance's pending
// supply and pre-ordered count reach the copy just after their event, so a
// seq alone could confirm (304) bytes from before them.
//
// POST (and other methods), WebSocket upgrades and SSE streams pass through
// untouched: POST answers are not cacheable by HTTP's rules anyway, and
// subscriptions must stream.
func cacheHeaders(maxAge time.Duration) func(http.Handler) http.Handler {
	public := "public, max-age=" + strconv.Itoa(int(maxAge/time.Second))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || r.Header.Get("Upgrade") != "" ||
				strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Add("Vary", "Accept, Authorization, Cookie")
			anonymous := isAnonymous(r)
			ctx, answerSeq := domain.WithAnswerSeq(r.Context())
			r = r.WithContext(ctx)
			bw := &bufferedWriter{w: w, status: http.StatusOK}
			bw.onOverflow = func() {
				w.Header().Set("Cache-Control", "no-store")
				if !anonymous {
					w.Header().Set("Cache-Control", "private, no-store")
				}
			}
			next.ServeHTTP(bw, r)
			if bw.overflowed {
				return
			}
			h := w.Header()
			switch {
			case !anonymous:
				h.Set("Cache-Control", "private, no-store")
			case bw.status != http.StatusOK || !succeeded(bw.buf.Bytes()):
				h.Set("Cache-Control", "no-store")
			default:
				etag := entityTag(h.Get("Content-Type"), bw.buf.Bytes())
				if seq, ok := answerSeq.Seq(); ok {
					h.Set("X-Stock-Seq", strconv.FormatInt(seq, 10))
				}
				h.Set("Cache-Control", public)
				h.Set("ETag", etag)
				// Per-caller counters mean nothing in a shared cache.
				for _, name := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
					h.Del(name)
				}
				if etagMatches(r.Header.Get("If-None-Match"), etag) {
					h.Del("Content-Type")
					h.Del("Content-Length")
					w.WriteHeader(http.StatusNotModified)
					return
				}
			}
			h.Set("Content-Length", strconv.Itoa(bw.buf.Len()))
			w.WriteHeader(bw.status)
			_, _ = w.Write(bw.buf.Bytes())
		})
	}
}

// sequencedFields is root field middleware: a root field other than
// availability (which notes its own seq, or unsequenced) makes the answer
// unsequenced, so its ETag is the hash alone.
func sequencedFields(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	if name := graphql.GetRootFieldContext(ctx).Field.Name; name != "availability" && name != "__typename" {
		domain.NoteUnsequenced(ctx)
	}
	return next(ctx)
}

// isAnonymous says whether the request came with no credentials at all: no
// Authorization header, no session cookie, and the authenticator found no
// caller and no token problem.
func isAnonymous(r *http.Request) bool {
	if r.Header.Get("Authorization") != "" {
		return false
	}
	if _, err := r.Cookie(auth.SessionCookie); err == nil {
		return false
	}
	a := domain.ActorFrom(r.Context())
	return a.Role == domain.RoleAnonymous && a.TokenProblem == ""
}

// succeeded says whether a GraphQL answer has data and no errors. gqlgen
// writes errors before data (graphql.Response's field order) and omits an
// empty list, so an answer that begins with an object of data has none: it
// is told without parsing (a second JSON parse of every answer would be a
// noticeable share of an availability POST's CPU). Anything else is parsed.
func succeeded(body []byte) bool {
	if bytes.HasPrefix(body, []byte(`{"data":{`)) {
		return true
	}
	var resp struct {
		Data   json.RawMessage `json:"data"`
		Errors json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return false
	}
	data, errs := bytes.TrimSpace(resp.Data), bytes.TrimSpace(resp.Errors)
	return len(data) > 0 && string(data) != "null" && (len(errs) == 0 || string(errs) == "null" || string(errs) == "[]")
}

// entityTag is a strong ETag for a representation: its media type and bytes.
func entityTag(contentType string, body []byte) string {
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "%s\n", contentType)
	_, _ = h.Write(body)
	return `"` + base64.RawURLEncoding.EncodeToString(h.Sum(nil)) + `"`
}

// etagMatches is If-None-Match's weak comparison (RFC 9110 13.1.2): * or any
// listed tag whose opaque part equals etag's, W/ or not.
func etagMatches(ifNoneMatch, etag string) bool {
	if ifNoneMatch == "" {
		return false
	}
	etag = strings.TrimPrefix(etag, "W/")
	for _, t := range strings.Split(ifNoneMatch, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

// bufferedWriter holds an answer back (status, headers and up to
// maxCachedResponseBytes of body) until the handler is done; beyond that it
// calls onOverflow, then sends what it holds and passes the rest through.
type bufferedWriter struct {
	w           http.ResponseWriter
	status      int
	wroteHeader bool
	buf         bytes.Buffer
	overflowed  bool
	onOverflow  func()
}

func (b *bufferedWriter) Header() http.Header { return b.w.Header() }

func (b *bufferedWriter) WriteHeader(status int) {
	if b.overflowed {
		return
	}
	if !b.wroteHeader {
		b.status, b.wroteHeader = status, true
	}
}

func (b *bufferedWriter) Write(p []byte) (int, error) {
	if b.overflowed {
		return b.w.Write(p)
	}
	b.wroteHeader = true
	if b.buf.Len()+len(p) <= maxCachedResponseBytes {
		return b.buf.Write(p)
	}
	b.overflowed = true
	b.onOverflow()
	b.w.WriteHeader(b.status)
	if _, err := b.w.Write(b.buf.Bytes()); err != nil {
		return 0, err
	}
	b.buf = bytes.Buffer{}
	return b.w.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (b *bufferedWriter) Unwrap() http.ResponseWriter { return b.w }

// maxPersistedQueryBytes is the largest query text that automatic persisted
// queries remember: storefront queries are small, and the cache holds
// persistedQueryCacheBytes of them per instance.
const maxPersistedQueryBytes = 32 << 10
