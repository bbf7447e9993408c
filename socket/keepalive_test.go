package socket_test

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"

	"inventory/socket"
)

// TestKeepAliveAfterTheAck: from the connection_ack on, a graphql-ws socket
// gets {"type":"ka"} every interval; a graphql-transport-ws one gets
// {"type":"ping"}, stays open while it answers with pongs, and is dropped
// two intervals after a ping it left unanswered. Nothing comes before the
// ack.
func TestKeepAliveAfterTheAck(t *testing.T) {
	t.Parallel()
	const interval = 100 * time.Millisecond
	e := setupImpl(t, socket.Implementation{KeepAlive: interval})

	c, srv := e.dial("graphql-ws")
	time.Sleep(2 * interval)
	if err := srv.conn.WriteJSON(rawJSON(`{"type":"connection_ack"}`)); err != nil {
		t.Fatal(err)
	}
	if got := string(read(t, c)); got != `{"type":"connection_ack"}` {
		t.Fatalf("graphql-ws: before the ack the client read %s", got)
	}
	for range 3 {
		if got := string(read(t, c)); got != `{"type":"ka"}` {
			t.Fatalf("graphql-ws: read %s, want a ka", got)
		}
	}

	c, srv = e.dial("graphql-transport-ws")
	if err := srv.conn.WriteJSON(rawJSON(`{"type":"connection_ack"}`)); err != nil {
		t.Fatal(err)
	}
	read(t, c) // the ack
	go func() {
		// The server reads, as gqlgen's transport does, and sees the pongs.
		for {
			if _, _, err := srv.conn.NextReader(); err != nil {
				return
			}
		}
	}()
	for range 5 {
		if got := string(read(t, c)); got != `{"type":"ping"}` {
			t.Fatalf("graphql-transport-ws: read %s, want a ping", got)
		}
		write(t, c, `{"type":"pong"}`)
	}
	// Silent from here: within a few intervals the connection is dropped.
	start := time.Now()
	for {
		if _, err := readErr(c, 10*interval); err != nil {
			break
		}
		if time.Since(start) > 10*interval {
			t.Fatal("a peer that stopped answering pings was not dropped")
		}
	}
}

// write sends the client's text message msg.
func write(t *testing.T, c *websocket.Conn, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// readErr reads the client's next message, or the error within d.
func readErr(c *websocket.Conn, d time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, b, err := c.Read(ctx)
	return b, err
}
