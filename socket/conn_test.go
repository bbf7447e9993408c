package socket_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"

	"inventory/socket"
)

// messages yields msgs one by one, as a fan-out member's batch.
func messages(msgs [][]byte) func(yield func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for _, m := range msgs {
			if !yield(m) {
				return
			}
		}
	}
}

// TestWriterSendsABatchInOneWrite: a socket's Writer speaks the
// subprotocol the client chose, and WriteMessages sends a batch of
// messages — 100 here, 64 KiB in all — as separate text messages, in
// order, in one write to the connection; WriteJSON sends a message bigger
// than the socket's write buffer in one write too.
func TestWriterSendsABatchInOneWrite(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, proto := range []string{"graphql-transport-ws", "graphql-ws"} {
		c, srv := e.dial(proto)
		w := socket.WriterFor(srv.ctx)
		if w == nil || w.Subprotocol() != proto {
			t.Fatalf("writer %v for a %s socket", w, proto)
		}
		var batch [][]byte
		for i := range 100 {
			batch = append(batch, fmt.Appendf(nil, `{"payload":%q,"id":"%d","type":"next"}`, strings.Repeat("x", 600), i))
		}
		before := srv.raw.writes.Load()
		if err := w.WriteMessages(messages(batch)); err != nil {
			t.Fatal(err)
		}
		if n := srv.raw.writes.Load() - before; n != 1 {
			t.Fatalf("%s: a batch of 100 messages took %d writes, want 1", proto, n)
		}
		for i, want := range batch {
			if got := read(t, c); string(got) != string(want) {
				t.Fatalf("%s: message %d is %.60s…, want %.60s…", proto, i, got, want)
			}
		}

		before = srv.raw.writes.Load()
		big := map[string]string{"type": "next", "payload": strings.Repeat("y", 10<<10)}
		if err := srv.conn.WriteJSON(big); err != nil {
			t.Fatal(err)
		}
		if n := srv.raw.writes.Load() - before; n != 1 {
			t.Fatalf("%s: a 10 KiB message took %d writes, want 1", proto, n)
		}
		if got := read(t, c); !strings.Contains(string(got), big["payload"]) {
			t.Fatalf("%s: the big message arrived as %.60s…", proto, got)
		}
	}
}

// TestWritersDoNotInterleave: batches written at once from many
// goroutines (fan-out members of one socket, gqlgen's own messages) each
// arrive whole: every message intact, each writer's in its order.
func TestWritersDoNotInterleave(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c, srv := e.dial("graphql-transport-ws")
	w := socket.WriterFor(srv.ctx)
	const writers, batches, per = 4, 10, 20
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for b := range batches {
				var batch [][]byte
				for i := range per {
					batch = append(batch, fmt.Appendf(nil, `{"id":"%d","seq":%d,"pad":%q}`, g, b*per+i, strings.Repeat("z", 100*g)))
				}
				var err error
				if g == 0 {
					for _, m := range batch { // gqlgen's transport: one message at a time
						if err = srv.conn.WriteJSON(rawJSON(m)); err != nil {
							break
						}
					}
				} else {
					err = w.WriteMessages(messages(batch))
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	next := make([]int, writers)
	for range writers * batches * per {
		var id, seq int
		var pad string
		got := read(t, c)
		if _, err := fmt.Sscanf(string(got), `{"id":"%d","seq":%d,"pad":%q}`, &id, &seq, &pad); err != nil || id < 0 || id >= writers || len(pad) != 100*id {
			t.Fatalf("a garbled message: %.80s… (%v)", got, err)
		}
		if seq != next[id] {
			t.Fatalf("writer %d: message %d after %d", id, seq, next[id]-1)
		}
		next[id]++
	}
	wg.Wait()
}

// rawJSON is a ready-made JSON message that WriteJSON writes as it is.
type rawJSON []byte

func (j rawJSON) MarshalJSON() ([]byte, error) { return j, nil }

// TestReadDeadlineClosesSocket: SetReadDeadline closes the socket when the
// deadline passes with nothing read (a deadline already past closes it at
// once); a deadline cleared with the zero time closes nothing.
func TestReadDeadlineClosesSocket(t *testing.T) {
	t.Parallel()
	e := setup(t)
	deadliner := func(srv server) transport.WebsocketReadDeadliner {
		d, ok := srv.conn.(transport.WebsocketReadDeadliner)
		if !ok {
			t.Fatal("the connection takes no read deadline")
		}
		return d
	}
	for _, in := range []time.Duration{-time.Second, 100 * time.Millisecond} {
		c, srv := e.dial("graphql-transport-ws")
		if err := deadliner(srv).SetReadDeadline(time.Now().Add(in)); err != nil && in > 0 {
			t.Fatal(err)
		}
		if code, reason := closeStatus(t, c); code != -1 {
			t.Fatalf("deadline in %s: closed with %d %q, want the connection dropped", in, code, reason)
		}
		if _, err := serverRead(t, srv); err == nil {
			t.Fatalf("deadline in %s: the server still reads", in)
		}
	}

	c, srv := e.dial("graphql-transport-ws")
	if err := deadliner(srv).SetReadDeadline(time.Now().Add(300 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := deadliner(srv).SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond) // past the cleared deadline
	if err := srv.conn.WriteJSON(map[string]string{"type": "ping"}); err != nil {
		t.Fatal(err)
	}
	if got := string(read(t, c)); got != `{"type":"ping"}` {
		t.Fatalf("after a cleared deadline the client read %s", got)
	}
}

// TestWriteCloseEndsWithItsCode: WriteClose starts the close handshake
// with the code given and returns; the transport's Close right after it
// does not cut the handshake short, so the client reads that code, not an
// abnormal closure. A second WriteClose does nothing.
func TestWriteCloseEndsWithItsCode(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c, srv := e.dial("graphql-transport-ws")
	if err := srv.conn.WriteClose(socket.CloseUnauthenticated, "token expired"); err != nil {
		t.Fatal(err)
	}
	if err := srv.conn.WriteClose(socket.CloseServiceRestart, "again"); err != nil {
		t.Fatal(err)
	}
	if err := srv.conn.Close(); err != nil {
		t.Fatal(err)
	}
	if code, reason := closeStatus(t, c); code != socket.CloseUnauthenticated || reason != "token expired" {
		t.Fatalf("closed with %d %q, want %d %q", code, reason, socket.CloseUnauthenticated, "token expired")
	}
}

// TestPeerCloseEndsReading: a client's normal close ends the server's
// reading with transport.ErrWebsocketClosed (gqlgen ends the connection
// quietly); any other close code is an error of its own.
func TestPeerCloseEndsReading(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, code := range []websocket.StatusCode{websocket.StatusNormalClosure, 4000} {
		c, srv := e.dial("graphql-transport-ws")
		go func() { _ = c.Close(code, "bye") }()
		_, err := serverRead(t, srv)
		if normal := code == websocket.StatusNormalClosure; errors.Is(err, transport.ErrWebsocketClosed) != normal || err == nil {
			t.Fatalf("client closed with %d: the server read %v", code, err)
		}
	}
}

// TestReadLimitRefusesBigMessages: a message past SetReadLimit is not
// read: the server's read fails and the client is told 1009 (too big).
func TestReadLimitRefusesBigMessages(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c, srv := e.dial("graphql-transport-ws")
	srv.conn.(transport.WebsocketReadLimiter).SetReadLimit(1024)
	go func() { _ = c.Write(context.Background(), websocket.MessageText, make([]byte, 2048)) }()
	if _, err := serverRead(t, srv); err == nil {
		t.Fatal("a 2 KiB message was read with a limit of 1 KiB")
	}
	if code, _ := closeStatus(t, c); code != websocket.StatusMessageTooBig {
		t.Fatalf("closed with %d, want %d", code, websocket.StatusMessageTooBig)
	}
}

// TestMessageSentWithTheHandshakeIsRead: a client that sends its first
// message in the same packet as its upgrade request (bytes the HTTP server
// had already buffered when the connection was handed over) has that
// message read first, intact.
func TestMessageSentWithTheHandshakeIsRead(t *testing.T) {
	t.Parallel()
	e := setup(t)
	nc, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	msg := []byte(`{"type":"connection_init","payload":{}}`)
	req := "GET / HTTP/1.1\r\nHost: " + nc.RemoteAddr().String() + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + base64.StdEncoding.EncodeToString(key) + "\r\n" +
		"Sec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n"
	if _, err := nc.Write(append([]byte(req), maskedFrame(msg)...)); err != nil {
		t.Fatal(err)
	}
	var srv server
	select {
	case srv = <-e.accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the server saw no upgrade request")
	}
	if srv.conn == nil {
		t.Fatal("the upgrade was refused")
	}
	t.Cleanup(func() { _ = srv.conn.Close() })
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	got, err := serverRead(t, srv)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(msg) {
		t.Fatalf("first message %q, want %q", got, msg)
	}
}

// maskedFrame is payload (under 126 bytes) as a client's text frame.
func maskedFrame(payload []byte) []byte {
	mask := make([]byte, 4)
	_, _ = rand.Read(mask)
	frame := []byte{0x81, 0x80 | byte(len(payload))}
	frame = append(frame, mask...)
	for i, b := range payload {
		frame = append(frame, b^mask[i%4])
	}
	return frame
}
