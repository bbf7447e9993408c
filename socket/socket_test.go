package socket_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"

	"inventory/socket"
)

// TestCloseSendsApplicationCode: after the handshake, Close on any context
// of the request closes its socket with the code and reason given (a 4403
// the client reads as "forbidden", never a 1000 it would retry), once: a
// second Close reports the socket closed and sends nothing more. Over
// plain HTTP, and before a connection was accepted, there is no socket to
// close.
func TestCloseSendsApplicationCode(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c, srv := e.dial("graphql-transport-ws")
	derived, cancel := context.WithCancel(srv.ctx)
	defer cancel()
	if !socket.Close(derived, socket.CloseForbidden, "not yours") {
		t.Fatal("Close found no socket on a context of the upgrade request")
	}
	if !socket.Close(srv.ctx, socket.CloseUnauthenticated, "again") {
		t.Fatal("a second Close did not report the socket closed")
	}
	if code, reason := closeStatus(t, c); code != socket.CloseForbidden || reason != "not yours" {
		t.Fatalf("closed with %d %q, want %d %q", code, reason, socket.CloseForbidden, "not yours")
	}
	if socket.Close(upgradeRequest(t, false), socket.CloseForbidden, "") {
		t.Fatal("Close reported a socket on a plain request")
	}
	if socket.Close(upgradeRequest(t, true), socket.CloseForbidden, "") {
		t.Fatal("Close reported a socket before one was accepted")
	}
}

// TestOnIsTrueOnlyForAcceptedSockets: On is true on the contexts of an
// upgrade request once its socket is accepted, and false for a plain
// request, an upgrade not yet accepted, and one refused (a foreign
// origin), for which WriterFor is nil too.
func TestOnIsTrueOnlyForAcceptedSockets(t *testing.T) {
	t.Parallel()
	e := setup(t, "shop.example")
	if socket.On(upgradeRequest(t, false)) || socket.On(upgradeRequest(t, true)) {
		t.Fatal("On before any socket was accepted")
	}
	_, srv := e.dial("graphql-transport-ws")
	if !socket.On(srv.ctx) || socket.WriterFor(srv.ctx) == nil {
		t.Fatal("On false (or no writer) for an accepted socket")
	}
	_, srv, err := e.dialWith(&websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"http://evil.example"}}})
	if err == nil || srv.conn != nil {
		t.Fatalf("an upgrade from a foreign origin was accepted (%v)", err)
	}
	if socket.On(srv.ctx) || socket.WriterFor(srv.ctx) != nil {
		t.Fatal("On true (or a writer) for a refused upgrade")
	}
	if _, srv, err := e.dialWith(&websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"http://shop.example"}}}); err != nil || !socket.On(srv.ctx) {
		t.Fatalf("an upgrade from an allowed origin: %v", err)
	}
}

// TestAcquireBoundsEachSocket: a socket holds at most max subscriptions
// and, separately, max operations in flight; a release gives its place
// back; concurrent acquires never pass max. Over plain HTTP, and with no
// max, acquiring always succeeds.
func TestAcquireBoundsEachSocket(t *testing.T) {
	t.Parallel()
	ctx := upgradeRequest(t, true)
	for _, acquire := range []func(context.Context, int) (func(), bool){socket.AcquireSubscription, socket.AcquireOperation} {
		first, ok1 := acquire(ctx, 2)
		_, ok2 := acquire(ctx, 2)
		if _, ok3 := acquire(ctx, 2); !ok1 || !ok2 || ok3 {
			t.Fatalf("three acquires with a max of 2: %v %v %v", ok1, ok2, ok3)
		}
		first()
		if _, ok := acquire(ctx, 2); !ok {
			t.Fatal("a released place was not given back")
		}
	}
	// Both counts are full now; the other socket's are its own.
	if _, ok := socket.AcquireSubscription(upgradeRequest(t, true), 2); !ok {
		t.Fatal("another socket's count is shared")
	}
	plain := upgradeRequest(t, false)
	for range 3 {
		if _, ok := socket.AcquireSubscription(plain, 1); !ok {
			t.Fatal("a plain request was refused a subscription")
		}
		if _, ok := socket.AcquireOperation(ctx, 0); !ok {
			t.Fatal("no max refused an operation")
		}
	}

	burst := upgradeRequest(t, true)
	var held atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, ok := socket.AcquireSubscription(burst, 5); ok {
				held.Add(1)
			}
		})
	}
	wg.Wait()
	if held.Load() != 5 {
		t.Fatalf("%d of 50 concurrent acquires held a place, want the max of 5", held.Load())
	}
}

// TestDetachedContextReachesNoSocket: a context detached from its socket
// (the shared execution of a fan-out group) acts as over plain HTTP — no
// socket, no writer, no start id, no caps — and Close on it calls the
// group's onClose instead of closing the socket it came from, which stays
// open.
func TestDetachedContextReachesNoSocket(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c, srv := e.dial("graphql-transport-ws")
	if err := c.Write(context.Background(), websocket.MessageText, []byte(`{"id":"1","type":"subscribe"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := serverRead(t, srv); err != nil {
		t.Fatal(err)
	}
	var closed []any
	d := socket.Detach(srv.ctx, func(code int, reason string) { closed = append(closed, code, reason) })
	if socket.On(d) || socket.WriterFor(d) != nil || socket.TakeStartID(d) != "" {
		t.Fatal("a detached context reaches its socket")
	}
	for range 3 {
		if _, ok := socket.AcquireSubscription(d, 1); !ok {
			t.Fatal("a detached context was refused a subscription")
		}
	}
	if !socket.Close(d, socket.CloseForbidden, "refused") || len(closed) != 2 || closed[0] != socket.CloseForbidden || closed[1] != "refused" {
		t.Fatalf("Close on a detached context: onClose got %v", closed)
	}
	if !socket.On(srv.ctx) || socket.TakeStartID(srv.ctx) != "1" {
		t.Fatal("the socket itself lost its state")
	}
	if err := srv.conn.WriteJSON(map[string]string{"type": "ka"}); err != nil {
		t.Fatal(err)
	}
	if got := string(read(t, c)); got != `{"type":"ka"}` {
		t.Fatalf("after Close on the detached context the socket got %s", got)
	}
}

// TestStartIDIsTheLastSubscribe: reading a subscribe (graphql-transport-ws)
// or start (graphql-ws) message records its id for TakeStartID, which
// returns it once; other messages record nothing, and every message
// reaches the reader unchanged.
func TestStartIDIsTheLastSubscribe(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c, srv := e.dial("graphql-transport-ws")
	for _, step := range []struct{ msg, id string }{
		{`{"id":"a1","type":"subscribe","payload":{"query":"subscription { x }"}}`, "a1"},
		{`{"id":"b2","type":"start"}`, "b2"},
		{`{"id":"c3","type":"complete"}`, ""},
		{`{"type":"ping"}`, ""},
		{`not json`, ""},
	} {
		if err := c.Write(context.Background(), websocket.MessageText, []byte(step.msg)); err != nil {
			t.Fatal(err)
		}
		b, err := serverRead(t, srv)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != step.msg {
			t.Fatalf("read %s, want %s", b, step.msg)
		}
		if id := socket.TakeStartID(srv.ctx); id != step.id {
			t.Fatalf("after %s: start id %q, want %q", step.msg, id, step.id)
		}
		if id := socket.TakeStartID(srv.ctx); id != "" {
			t.Fatalf("after %s: start id %q taken twice", step.msg, id)
		}
	}
	if socket.TakeStartID(upgradeRequest(t, false)) != "" {
		t.Fatal("a start id on a plain request")
	}
}
