package api

import (
	"bytes"
	"crypto/sha256"
	"io"
	"mime"
	"net/http"
	"strings"
	"unsafe"

	"inventory/domain"
)

// AnswerValidator says whether answers read from the in-memory availability
// copy at deps would still be answered the same. avail.Copy is one.
type AnswerValidator interface {
	Unchanged(deps []domain.AnswerDep) bool
}

// Bounds of the serialized-answer cache: at most this many answers, of at
// most this many bytes in all (keys, answers and what they read: see
// cachedAnswer.size); past either the least recently used answers go, so a
// flood of distinct requests cannot keep a storefront's hot ones cold.
const (
	maxCachedAnswers     = 10_000
	maxCachedAnswerBytes = 32 << 20
)

// answerCache keeps, per anonymous GET (its whole query string: the
// persisted query's hash or text, variables, operation name) or POST (its
// JSON body), and per media type answered in (see answerKey), the serialized answer of a query whose every root field was availability
// answered from the in-memory copy, with what it read; the same request again is
// answered with those bytes, without gqlgen, while none of those SKUs'
// balances changed (and the copy is the same load and within its bound).
// It runs inside the rate limiter: a hit spends the anonymous read budget
// like any read, and inside cacheHeaders, which tags the bytes as usual.
type answerCache struct {
	check   AnswerValidator
	answers *byteLRU[*cachedAnswer]
}

type cachedAnswer struct {
	body        []byte
	contentType string
	seq         int64
	deps        []domain.AnswerDep
}

// size is what an entry under key holds that callers chose the size of:
// the key (a GET's query string), the answer and what it read (a dep per
// SKU read: its code and two words).
func (a *cachedAnswer) size(key string) int64 {
	n := len(key) + len(a.body)
	for _, d := range a.deps {
		n += int(unsafe.Sizeof(d)) + len(d.SKU)
	}
	return int64(n)
}

func newAnswerCache(check AnswerValidator) *answerCache {
	if check == nil {
		return nil
	}
	answers := newByteLRU(maxCachedAnswerBytes, func(key string, a *cachedAnswer) int64 { return a.size(key) })
	answers.maxEntries = maxCachedAnswers
	return &answerCache{check: check, answers: answers}
}

func (c *answerCache) middleware(next http.Handler) http.Handler {
	if c == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := answerKey(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodPost {
			// cacheHeaders notes what GETs read; a POST's reads are noted
			// here. Its answer stays out of HTTP caches (no ETag, no
			// Cache-Control): only this server reuses its bytes.
			ctx, _ := domain.WithAnswerSeq(r.Context())
			r = r.WithContext(ctx)
		}
		hit, _ := c.answers.get(key)
		if hit != nil && c.check.Unchanged(hit.deps) {
			domain.NoteAnswerSeq(r.Context(), hit.seq)
			w.Header().Set("Content-Type", hit.contentType)
			w.Header().Set("X-Answer-Cache", "hit") // for operators (and tests): gqlgen did not run
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(hit.body)
			return
		}
		rec := &recordingWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		a := domain.AnswerSeqFrom(r.Context())
		if a == nil || requestWrites(r.Context()) || rec.status != http.StatusOK || rec.overflow || !succeeded(rec.buf.Bytes()) {
			return
		}
		seq, sequenced := a.Seq()
		deps := a.Deps()
		if !sequenced || len(deps) == 0 {
			return
		}
		c.answers.put(key, &cachedAnswer{body: bytes.Clone(rec.buf.Bytes()), contentType: w.Header().Get("Content-Type"), seq: seq, deps: deps})
	})
}

// maxCachedRequestBytes is the largest POST body or GET query string whose
// answer is kept: storefront queries are small (a persisted query's text is
// at most maxPersistedQueryBytes), and a GET's key is its query string,
// which a caller could otherwise pad to the 1 MB net/http reads: a
// megabyte kept per distinct request.
const maxCachedRequestBytes = 64 << 10

// answerKey is the cache key of an anonymous query request, false for
// anything the cache leaves alone (a caller with credentials, a method
// other than GET and POST, a WebSocket upgrade, an SSE stream, a POST body
// that is not JSON or is large, an Accept that allows neither media type).
// A GET's key is the media type its Accept header picks (responseMediaType)
// and its whole query string; a POST's the SHA-256 of that media type and
// its body (query or persisted query hash, operation name, variables and
// extensions, byte for byte), so an entry is only ever made, and found, for
// exactly the request that was answered, in the media type it was answered
// in: a document gqlgen accepted. limitBody has already read (and
// bounded) the body, decoded it and marked mutations; the bytes are read
// again from memory and put back.
func answerKey(r *http.Request) (string, bool) {
	if (r.Method != http.MethodGet && r.Method != http.MethodPost) || r.Header.Get("Upgrade") != "" ||
		strings.Contains(r.Header.Get("Accept"), "text/event-stream") || !isAnonymous(r) {
		return "", false
	}
	media, acceptable := responseMediaType(r.Header.Get("Accept"))
	if !acceptable {
		return "", false // answered 406, never from the cache
	}
	if r.Method == http.MethodGet {
		if len(r.URL.RawQuery) > maxCachedRequestBytes {
			return "", false // a key as long as the caller likes (net/http reads request lines up to 1 MB)
		}
		return "G" + media + "\x00" + r.URL.RawQuery, true
	}
	if mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mediaType != "application/json" ||
		requestWrites(r.Context()) || r.Body == nil {
		return "", false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxCachedRequestBytes+1))
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
	if err != nil || len(body) > maxCachedRequestBytes {
		return "", false
	}
	h := sha256.New()
	_, _ = io.WriteString(h, media)
	_, _ = h.Write([]byte{0})
	_, _ = h.Write(body)
	return "P" + string(h.Sum(nil)), true
}

// recordingWriter passes an answer through and keeps a copy of it (up to
// maxCachedResponseBytes).
type recordingWriter struct {
	http.ResponseWriter
	status   int
	buf      bytes.Buffer
	overflow bool
}

func (w *recordingWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	if !w.overflow {
		if w.buf.Len()+len(p) > maxCachedResponseBytes {
			w.overflow = true
		} else {
			w.buf.Write(p)
		}
	}
	return w.ResponseWriter.Write(p)
}
