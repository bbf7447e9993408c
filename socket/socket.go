// Package socket lets the server close a GraphQL WebSocket with an
// application close code (4401, 4403) after the handshake, which gqlgen's
// transport only offers during connection_init. Clients treat 1000 as "try
// again", so a refused subscription must not close with it.
package socket

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"
)

// Close codes for refused sockets (graphql-ws conventions), and 1013 ("try
// again later", RFC 6455's registry) when the server could not check the
// token at all: the client should keep its token and reconnect, not
// discard it as it would on 4401.
const (
	CloseUnauthenticated = 4401
	CloseForbidden       = 4403
	CloseTryAgain        = 1013
	// CloseServiceRestart (1012) ends the sockets of an instance that is
	// shutting down: clients reconnect (to another instance) and resume.
	CloseServiceRestart = 1012
	// CloseTooManyFailures (4429, graphql-ws's "too many requests") refuses
	// a connection_init from a client address that has spent its budget of
	// failed authentications (INVENTORY_RATE_LIMIT_AUTH_FAILURES): the token
	// was not even checked, so the client should wait (the rate limit
	// window) before it reconnects, and not discard its token.
	CloseTooManyFailures = 4429
)

type holderKey struct{}

// holder is filled with the connection once the upgrade succeeded.
type holder struct {
	mu     sync.Mutex
	conn   transport.WebsocketConn
	closed bool
	subs   int // live subscriptions on the socket (AcquireSubscription)
	ops    int // queries and mutations in flight on the socket (AcquireOperation)
	// startID is the id of the subscribe message read last: gqlgen builds
	// the operation from it before it reads the next message (BindStartID).
	startID string
}

// Middleware gives every WebSocket upgrade request a place for its
// connection, so Close can find it from any context derived from the request.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			r = r.WithContext(context.WithValue(r.Context(), holderKey{}, &holder{}))
		}
		next.ServeHTTP(w, r)
	})
}

// Implementation is gqlgen's WebSocket implementation on coder/websocket
// that also records each accepted connection for Close and for fanned-out
// writes (Writer).
type Implementation struct {
	AcceptOptions websocket.AcceptOptions
	// KeepAlive is the keep-alive interval (keepAlive), 0 none: gqlgen's
	// transport's intervals are then left 0, this does their work.
	KeepAlive time.Duration
}

// Accept upgrades the request and records the connection.
func (i Implementation) Accept(w http.ResponseWriter, r *http.Request, opts transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	h, _ := r.Context().Value(holderKey{}).(*holder)
	conn, err := accept(w, r, i.AcceptOptions, opts, h, i.KeepAlive)
	if err != nil {
		return nil, err
	}
	if h != nil {
		h.mu.Lock()
		h.conn = conn
		h.mu.Unlock()
	}
	return conn, nil
}

// detached stands in for the socket of a context that must not reach the
// socket it was made from (Detach).
type detached struct{ onClose func(code int, reason string) }

// Detach returns ctx without its WebSocket: On, WriterFor and the acquire
// functions act as over plain HTTP, and Close calls onClose instead. A
// subscription shared by the subscribers of many sockets runs on such a
// context, so nothing it does lands on the socket of the subscriber that
// happened to start it, and a refusal that closes "the" socket (4401,
// 4403) closes each subscriber's (onClose).
func Detach(ctx context.Context, onClose func(code int, reason string)) context.Context {
	return context.WithValue(ctx, holderKey{}, detached{onClose})
}

// TakeStartID returns the id of the subscribe message the socket read last
// (see holder.startID) and forgets it; "" over plain HTTP and SSE. gqlgen
// builds an operation from a message before it reads the next one, so
// called while the operation is built (an OperationContextMutator) it is
// that operation's id.
func TakeStartID(ctx context.Context) string {
	h, ok := ctx.Value(holderKey{}).(*holder)
	if !ok {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	id := h.startID
	h.startID = ""
	return id
}

// Writer is what writes ready-made messages to one WebSocket.
type Writer interface {
	// WriteMessages writes each message as a text message, in one system
	// call as far as they fit.
	WriteMessages(msgs func(yield func([]byte) bool)) error
	// TryWrite writes ready-made frames (AppendTextFrame) without waiting
	// for the socket; frames must not change afterwards. See TryResult.
	TryWrite(frames []byte) (TryResult, error)
	// WriteFrames writes ready-made frames, waiting for the socket (and for
	// whatever TryWrite queued).
	WriteFrames(frames []byte) error
	// Subprotocol is the negotiated subprotocol (graphql-transport-ws or
	// graphql-ws), which decides how a data message is framed.
	Subprotocol() string
}

// WriterFor returns the writer of the WebSocket ctx belongs to, or nil over
// plain HTTP and SSE.
func WriterFor(ctx context.Context) Writer {
	h, ok := ctx.Value(holderKey{}).(*holder)
	if !ok {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.conn.(*conn); ok {
		return c
	}
	return nil
}

// Close closes the WebSocket that ctx belongs to with code and reason, and
// reports whether there was one (false over plain HTTP and SSE).
func Close(ctx context.Context, code int, reason string) bool {
	if d, ok := ctx.Value(holderKey{}).(detached); ok {
		d.onClose(code, reason)
		return true
	}
	h, ok := ctx.Value(holderKey{}).(*holder)
	if !ok {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == nil || h.closed {
		return h.closed
	}
	h.closed = true
	_ = h.conn.WriteClose(code, reason)
	return true
}

// On reports whether ctx belongs to an accepted WebSocket (false over plain
// HTTP and SSE, and for an upgrade request that was refused).
func On(ctx context.Context) bool {
	h, ok := ctx.Value(holderKey{}).(*holder)
	if !ok {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conn != nil
}

// AcquireSubscription counts one more live subscription on the WebSocket that
// ctx belongs to, unless it already has max; release gives the place back
// (call it once). Over plain HTTP and SSE a request is its one subscription,
// and this always succeeds.
func AcquireSubscription(ctx context.Context, max int) (release func(), ok bool) {
	return acquire(ctx, max, func(h *holder) *int { return &h.subs })
}

// AcquireOperation counts one more query or mutation in flight on the
// WebSocket that ctx belongs to, unless it already has max: gqlgen runs
// every operation of a socket at once, each on a goroutine of its own, so
// without this one socket could start any number. release gives the place
// back (call it once). Over plain HTTP and SSE a request is its one
// operation, and this always succeeds.
func AcquireOperation(ctx context.Context, max int) (release func(), ok bool) {
	return acquire(ctx, max, func(h *holder) *int { return &h.ops })
}

func acquire(ctx context.Context, max int, count func(*holder) *int) (release func(), ok bool) {
	h, found := ctx.Value(holderKey{}).(*holder)
	if !found || max <= 0 {
		return func() {}, true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n := count(h)
	if *n >= max {
		return nil, false
	}
	*n++
	return func() {
		h.mu.Lock()
		*n--
		h.mu.Unlock()
	}, true
}
