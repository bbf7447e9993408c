package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
)

// BytesInFlight bounds, per client address, the bytes the server holds for
// that address's requests at once: JSON bodies being read and answers being
// written. It counts what the server spends, not what the caller sends: a
// body is read whole before the rate limit (which needs it), so connections
// each holding a body one byte short of complete pin it until the read
// timeout, and clients that never read their answers pin them until the
// write timeout, whatever their rate. A body is reserved at its declared
// (or the largest allowed) size before a byte of it is read; an answer at
// its size before it is written; both are given back when the request
// ends. Past the bound the request is 429 (RATE_LIMITED).
type BytesInFlight struct {
	max int64 // 0: no bound
	mu  sync.Mutex
	by  map[string]int64
}

// NewBytesInFlight bounds each address to max bytes; max < 1 is no bound.
func NewBytesInFlight(max int64) *BytesInFlight {
	return &BytesInFlight{max: max, by: map[string]int64{}}
}

func (b *BytesInFlight) take(key string, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.by[key]+n > b.max && b.by[key] > 0 {
		return false // one request may always go alone: the caps bound it
	}
	b.by[key] += n
	return true
}

func (b *BytesInFlight) give(key string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.by[key] -= n; b.by[key] <= 0 {
		delete(b.by, key)
	}
}

// flight is one request's share of its address's bytes in flight.
type flight struct {
	b   *BytesInFlight
	key string
	n   atomic.Int64
}

type flightKey struct{}

// middleware gives each request a share, returned when it ends.
func (b *BytesInFlight) middleware(next http.Handler) http.Handler {
	if b == nil || b.max < 1 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := &flight{b: b, key: ipKey(r.Context())}
		defer func() {
			if n := f.n.Load(); n > 0 {
				b.give(f.key, n)
			}
		}()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), flightKey{}, f)))
	})
}

// takeInFlight reserves n bytes for the request of ctx from its address's
// bound; false when the address has no room (or true without a bound).
func takeInFlight(ctx context.Context, n int64) bool {
	f, _ := ctx.Value(flightKey{}).(*flight)
	if f == nil {
		return true
	}
	if !f.b.take(f.key, n) {
		return false
	}
	f.n.Add(n)
	return true
}

// inFlightRefusal is the message of a request refused for its address's
// bytes in flight.
func inFlightRefusal(ctx context.Context) string {
	f, _ := ctx.Value(flightKey{}).(*flight)
	limit := int64(0)
	if f != nil {
		limit = f.b.max
	}
	return fmt.Sprintf("this address already has %s bytes of requests and answers in flight (INVENTORY_MAX_BYTES_IN_FLIGHT_PER_IP); wait for them to finish", strconv.FormatInt(limit, 10))
}
