package api

import (
	"context"
	"net/http"
	"strings"
	"time"
)

// Deadlines bound how long a plain request may take to arrive and to be
// answered, so a client that trickles its body or never reads the answer
// cannot hold a connection (and the goroutine and memory behind it). The
// HTTP server itself only bounds headers (ReadHeaderTimeout) and idle
// keep-alive connections: a server-wide ReadTimeout or WriteTimeout would
// also cut the long-lived ones, so subscriptions (a WebSocket upgrade or a
// text/event-stream response) get no deadline here; their liveness is the
// WebSocket keep-alive and the stall cut-off.
type Deadlines struct {
	Read  time.Duration // from the headers to the end of the body
	Write time.Duration // from the headers to the end of the answer
	// Handle ends the request's context: a request still waiting for a
	// database connection or a lock after this long gives up (its
	// transaction rolls back) instead of queueing behind a hot balance
	// until the client has long gone.
	Handle time.Duration
}

func (d Deadlines) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" && !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			rc := http.NewResponseController(w)
			now := time.Now()
			if d.Read > 0 {
				_ = rc.SetReadDeadline(now.Add(d.Read))
			}
			if d.Write > 0 {
				_ = rc.SetWriteDeadline(now.Add(d.Write))
			}
			if d.Handle > 0 {
				ctx, cancel := context.WithTimeout(r.Context(), d.Handle)
				defer cancel()
				r = r.WithContext(ctx)
			}
		}
		next.ServeHTTP(w, r)
	})
}
