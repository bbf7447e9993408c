package socket_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"inventory/socket"
)

// TestPeerThatNeverReadsIsDropped is the attack of a client that subscribes
// and never reads, answering the keep-alive with unsolicited pongs: each pong
// cleared the read deadline while the server's ping waited behind a write the
// peer would never take, so the socket, its goroutines and a few MB of the
// kernel's send buffer stayed as long as the client liked (100 such sockets
// pinned 177 MB). A write that makes no progress for two keep-alive
// intervals now drops the connection.
func TestPeerThatNeverReadsIsDropped(t *testing.T) {
	t.Parallel()
	const interval = 100 * time.Millisecond
	e := setupImpl(t, socket.Implementation{KeepAlive: interval})
	c, srv := e.dialSmallWindow("graphql-transport-ws")
	if err := srv.conn.WriteJSON(rawJSON(`{"type":"connection_ack"}`)); err != nil {
		t.Fatal(err)
	}
	readerDone := make(chan struct{})
	go func() { // the server reads, as gqlgen's transport does
		defer close(readerDone)
		for {
			if _, _, err := srv.conn.NextReader(); err != nil {
				return
			}
		}
	}()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { // pongs nobody asked for, and never a read
		for ctx.Err() == nil {
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			err := c.Write(wctx, websocket.MessageText, []byte(`{"type":"pong"}`))
			cancel()
			if err != nil {
				return
			}
			time.Sleep(interval / 2)
		}
	}()
	writeFailed := make(chan time.Duration, 1)
	go func() {
		big := rawJSON(`{"type":"next","payload":"` + strings.Repeat("x", 16<<10) + `"}`)
		start := time.Now()
		for srv.conn.WriteJSON(big) == nil {
		}
		writeFailed <- time.Since(start)
	}()
	select {
	case d := <-writeFailed:
		t.Logf("the server's writes failed after %v", d)
	case <-time.After(10 * time.Second):
		t.Fatal("a peer that never reads still holds the server's writer after 10s")
	}
	select {
	case <-readerDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the stalled socket's reader is still running: the connection was not closed")
	}
}

// TestSlowReaderIsNotDropped: a peer that takes its messages slowly, but
// takes them, keeps its socket however long each write waits.
func TestSlowReaderIsNotDropped(t *testing.T) {
	t.Parallel()
	const interval = 100 * time.Millisecond
	e := setupImpl(t, socket.Implementation{KeepAlive: interval})
	c, srv := e.dialSmallWindow("graphql-ws")
	const n = 30
	errs := make(chan error, 1)
	go func() {
		big := rawJSON(`{"type":"data","payload":"` + strings.Repeat("y", 64<<10) + `"}`)
		for range n {
			if err := srv.conn.WriteJSON(big); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for i := range n {
		if b := read(t, c); len(b) < 64<<10 {
			t.Fatalf("message %d: %d bytes", i, len(b))
		}
		time.Sleep(interval * 3 / 2) // slower than a write's stall bound, between messages
	}
	if err := <-errs; err != nil {
		t.Fatalf("writing to a slow reader: %v", err)
	}
}

// dialSmallWindow dials as dial does, from a client whose receive buffer is
// as small as the kernel allows, so the server's writes soon wait for it.
func (e *env) dialSmallWindow(subprotocol string) (*websocket.Conn, server) {
	e.t.Helper()
	dialer := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	client := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	c, srv, err := e.dialWith(&websocket.DialOptions{Subprotocols: []string{subprotocol}, HTTPClient: client})
	if err != nil {
		e.t.Fatal(err)
	}
	c.SetReadLimit(1 << 20)
	return c, srv
}
