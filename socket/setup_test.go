package socket_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"

	"inventory/socket"
)

// env serves socket.Implementation behind socket.Middleware, as the
// server's /graphql does, and hands each accepted connection to the test.
type env struct {
	t        *testing.T
	url      string
	accepted chan server
	conns    sync.Map // client address → *countingConn, the server's end
}

// server is the server's side of one accepted WebSocket: the connection
// gqlgen's transport would get, the request's context (where the socket
// is recorded), and the raw connection under it, which counts writes.
type server struct {
	conn transport.WebsocketConn
	ctx  context.Context
	raw  *countingConn
}

// setup serves WebSockets that may come from origins (besides the
// server's own and none), negotiating gqlgen's two subprotocols.
func setup(t *testing.T, origins ...string) *env {
	t.Helper()
	return setupImpl(t, socket.Implementation{AcceptOptions: websocket.AcceptOptions{OriginPatterns: origins}})
}

// setupImpl serves impl.
func setupImpl(t *testing.T, impl socket.Implementation) *env {
	t.Helper()
	e := &env{t: t, accepted: make(chan server, 1)}
	ts := httptest.NewUnstartedServer(socket.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := impl.Accept(w, r, transport.WebsocketAcceptOptions{Subprotocols: []string{"graphql-transport-ws", "graphql-ws"}})
		if err != nil {
			e.accepted <- server{ctx: r.Context()}
			return
		}
		raw, _ := e.conns.Load(r.RemoteAddr)
		e.accepted <- server{conn: conn, ctx: r.Context(), raw: raw.(*countingConn)}
	})))
	ts.Listener = countingListener{Listener: ts.Listener, conns: &e.conns}
	ts.Start()
	t.Cleanup(ts.Close)
	e.url = ts.URL
	return e
}

// dial opens a WebSocket offering subprotocol and returns both ends.
func (e *env) dial(subprotocol string) (*websocket.Conn, server) {
	e.t.Helper()
	c, srv, err := e.dialWith(&websocket.DialOptions{Subprotocols: []string{subprotocol}})
	if err != nil {
		e.t.Fatal(err)
	}
	return c, srv
}

// dialWith opens a WebSocket with opts; srv.conn is nil if the server
// refused it.
func (e *env) dialWith(opts *websocket.DialOptions) (*websocket.Conn, server, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.url, "http"), opts)
	if c != nil {
		e.t.Cleanup(func() { _ = c.CloseNow() })
	}
	var srv server
	select {
	case srv = <-e.accepted:
	case <-ctx.Done():
		e.t.Fatal("the server saw no upgrade request")
	}
	if srv.conn != nil {
		e.t.Cleanup(func() { _ = srv.conn.Close() })
	}
	return c, srv, err
}

// countingListener wraps each accepted connection in a countingConn.
type countingListener struct {
	net.Listener
	conns *sync.Map
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := &countingConn{Conn: c}
	l.conns.Store(c.RemoteAddr().String(), cc)
	return cc, nil
}

// countingConn counts the writes (system calls) made on a connection.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

// SyscallConn is the TCP connection's: TryWrite writes to it without
// blocking (those writes are not counted).
func (c *countingConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(*net.TCPConn).SyscallConn()
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// read reads the client's next message, failing the test after 10 s.
func read(t *testing.T, c *websocket.Conn) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	typ, b, err := c.Read(ctx)
	if err != nil || typ != websocket.MessageText {
		t.Fatalf("read: %v %s %v", typ, b, err)
	}
	return b
}

// serverRead is what the server's next NextReader gives: the message, or
// the error. It fails the test if there is neither within 10 s.
func serverRead(t *testing.T, srv server) ([]byte, error) {
	t.Helper()
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		_, r, err := srv.conn.NextReader()
		var b []byte
		if err == nil {
			b, err = io.ReadAll(r)
		}
		done <- result{b, err}
	}()
	select {
	case res := <-done:
		return res.b, res.err
	case <-time.After(10 * time.Second):
		_ = srv.conn.Close()
		t.Fatal("the server read nothing within 10s")
		return nil, nil
	}
}

// closeStatus reads until the connection ends and returns how the server
// closed it (-1 for no close frame), failing the test after 10 s.
func closeStatus(t *testing.T, c *websocket.Conn) (websocket.StatusCode, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, _, err := c.Read(ctx)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			t.Fatal("the connection is still open after 10s")
		}
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code, ce.Reason
		}
		return -1, err.Error()
	}
}

// upgradeRequest is a context as socket.Middleware makes it for a
// WebSocket upgrade request (a place for its connection) when upgrade is
// true, and for a plain request otherwise; no connection is accepted.
func upgradeRequest(t *testing.T, upgrade bool) context.Context {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/graphql", nil)
	if upgrade {
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", "websocket")
	}
	var ctx context.Context
	socket.Middleware(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { ctx = r.Context() })).
		ServeHTTP(httptest.NewRecorder(), r)
	return ctx
}
