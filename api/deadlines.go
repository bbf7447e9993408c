package api

import (
	"bufio"
	"context"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"
)

// Deadlines bound how long a request may take to arrive and to be answered,
// so a client that trickles its body or never reads the answer cannot hold a
// connection (and the goroutine and memory behind it). The HTTP server
// itself only bounds headers (ReadHeaderTimeout) and idle keep-alive
// connections: a server-wide ReadTimeout or WriteTimeout would also cut the
// long-lived ones. Headers lift nothing by themselves: every request gets
// the read and the write deadline, and only two things end them, each once
// it has happened —
//
//   - a completed WebSocket handshake (the connection is hijacked): the
//     socket's liveness is then the keep-alive and the stall cut-off;
//   - an SSE request (POST, Accept: text/event-stream, JSON) whose body,
//     read under the read deadline, is a subscription (streamDeadlines).
//
// Every request but a WebSocket upgrade and an SSE subscription also gets
// the request timeout (Handle); an SSE query or mutation gets it once its
// body has been read.
type Deadlines struct {
	Read  time.Duration // from the headers to the end of the body
	Write time.Duration // from the headers to the end of the answer
	// Handle ends the request's context: a request still waiting for a
	// database connection or a lock after this long gives up (its
	// transaction rolls back) instead of queueing behind a hot balance
	// until the client has long gone.
	Handle time.Duration
	// Stall ends an SSE subscription whose write has not gone out this long
	// after it was made (INVENTORY_SUBSCRIBER_STALL_TIMEOUT): a client that
	// never reads would otherwise hold the stream's goroutines, its place in
	// a fan-out group and the kernel's send buffer for as long as it stays
	// connected. 0: no bound.
	Stall time.Duration
}

func (d Deadlines) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		now := time.Now()
		if d.Read > 0 {
			_ = rc.SetReadDeadline(now.Add(d.Read))
		}
		if d.Write > 0 {
			_ = rc.SetWriteDeadline(now.Add(d.Write))
		}
		w = &hijackClears{ResponseWriter: w}
		switch {
		case isWebSocketUpgrade(r):
			// Its context is the socket's life once the handshake is done.
		case isSSERequest(r):
			r = r.WithContext(context.WithValue(r.Context(), sseDeadlinesKey{}, d))
		case d.Handle > 0:
			ctx, cancel := context.WithTimeout(r.Context(), d.Handle)
			defer cancel()
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}

// isWebSocketUpgrade: a GET asking to upgrade to WebSocket (RFC 6455 4.1).
// Whether it becomes one is up to the handshake.
func isWebSocketUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.EqualFold(strings.TrimSpace(r.Header.Get("Upgrade")), "websocket")
}

// isSSERequest: what gqlgen's SSE transport serves (transport.SSE.Supports).
func isSSERequest(r *http.Request) bool {
	if r.Method != http.MethodPost || !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		return false
	}
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mediaType == "application/json"
}

type sseDeadlinesKey struct{}

// streamDeadlines settles an SSE request's deadlines once its body has been
// read (limitBody calls it): a subscription streams for as long as it lives,
// so its read deadline is cleared (a read deadline left on the connection
// would end the stream's context when it passed) and each of its writes gets
// the stall bound instead of the one for the whole answer (stallBounded); a
// query or mutation keeps its write deadline and gets the request timeout.
// Any other request is returned as it is. Call done when the request has
// been handled.
func streamDeadlines(w http.ResponseWriter, r *http.Request, subscription bool) (_ http.ResponseWriter, _ *http.Request, done func()) {
	d, ok := r.Context().Value(sseDeadlinesKey{}).(Deadlines)
	if !ok {
		return w, r, func() {}
	}
	if subscription {
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
		if d.Stall <= 0 {
			return w, r, func() {}
		}
		ctx, cancel := context.WithCancel(r.Context())
		sw := &stallBounded{ResponseWriter: w, rc: rc, stall: d.Stall, cancel: cancel}
		return sw, r.WithContext(ctx), cancel
	}
	if d.Handle <= 0 {
		return w, r, func() {}
	}
	ctx, cancel := context.WithTimeout(r.Context(), d.Handle)
	return w, r.WithContext(ctx), cancel
}

// stallBounded is an SSE subscription's writer: every write and flush must
// go out within stall, or the subscription's context ends, and with it the
// stream (gqlgen's SSE transport ignores write errors, and net/http notices
// a peer that stopped reading only when it closes).
type stallBounded struct {
	http.ResponseWriter
	rc     *http.ResponseController
	stall  time.Duration
	cancel context.CancelFunc
}

func (s *stallBounded) Write(p []byte) (int, error) {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.stall))
	n, err := s.ResponseWriter.Write(p)
	if err != nil {
		s.cancel()
	}
	return n, err
}

// Flush sends what the stream wrote; it is where the bytes meet the peer.
func (s *stallBounded) Flush() {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.stall))
	if err := s.rc.Flush(); err != nil {
		s.cancel()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (s *stallBounded) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// hijackClears is the response writer of every request: when a WebSocket
// handshake hijacks the connection, the deadlines set for the request are
// cleared on it (net/http leaves them in place).
type hijackClears struct{ http.ResponseWriter }

func (h *hijackClears) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err == nil {
		_ = conn.SetDeadline(time.Time{})
	}
	return conn, brw, err
}

// Flush serves SSE's streaming through this writer.
func (h *hijackClears) Flush() { _ = http.NewResponseController(h.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (h *hijackClears) Unwrap() http.ResponseWriter { return h.ResponseWriter }
