package socket_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"inventory/socket"
)

// TestTryWriteSendsReadyMadeFrames: frames made by AppendTextFrame — short,
// 16-bit and 64-bit lengths, two in one slice — reach the client as the
// text messages they frame, on both subprotocols.
func TestTryWriteSendsReadyMadeFrames(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, proto := range []string{"graphql-transport-ws", "graphql-ws"} {
		c, srv := e.dial(proto)
		c.SetReadLimit(1 << 20)
		w := socket.WriterFor(srv.ctx)
		for _, size := range []int{3, 125, 126, 65535, 65536, 200_000} {
			body := []byte(strings.Repeat("x", size))
			frames := socket.AppendTextFrame(nil, []byte(`{"p":"`), body, []byte(`"}`))
			frames = socket.AppendTextFrame(frames, []byte(`{"second":true}`))
			res, err := w.TryWrite(frames)
			for res == socket.Busy && err == nil {
				// Only a write in progress makes it busy here: a queued
				// rest of an earlier frame.
				time.Sleep(time.Millisecond)
				res, err = w.TryWrite(frames)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := read(t, c), `{"p":"`+string(body)+`"}`; string(got) != want {
				t.Fatalf("%s, %d bytes: read %.40s… (%d bytes), want %d bytes", proto, size, got, len(got), len(want))
			}
			if got := read(t, c); string(got) != `{"second":true}` {
				t.Fatalf("%s: second message %s", proto, got)
			}
		}
	}
}

// TestTryWriteQueuesForASlowReader: when the kernel takes only part of the
// frames (the client does not read), TryWrite says Queued, the rest goes
// out in the background, later TryWrites are Busy while it does, and a
// later write of the transport waits for the rest: the client reads everything, in order,
// whole.
func TestTryWriteQueuesForASlowReader(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c, srv := e.dial("graphql-transport-ws")
	if err := srv.raw.Conn.(*net.TCPConn).SetWriteBuffer(16 << 10); err != nil {
		t.Fatal(err)
	}
	w := socket.WriterFor(srv.ctx)
	c.SetReadLimit(1 << 20)
	// Frames until the socket stays busy: what the kernel did not take
	// drains in the background until the client's buffers are full too.
	var sent [][]byte
	queued := false
	for busy := 0; busy < 20; {
		if len(sent) == 2000 {
			t.Fatal("2000 frames of 64 KiB went out to a client that does not read")
		}
		msg := fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, len(sent), strings.Repeat("x", 64<<10))
		res, err := w.TryWrite(socket.AppendTextFrame(nil, msg))
		if err != nil {
			t.Fatal(err)
		}
		switch res {
		case socket.Busy:
			if !queued {
				t.Fatalf("frame %d: busy with nothing queued", len(sent))
			}
			busy++
			time.Sleep(10 * time.Millisecond)
			continue
		case socket.Queued:
			queued = true
		}
		busy = 0
		sent = append(sent, msg)
	}
	written := make(chan error, 1)
	go func() { written <- srv.conn.WriteJSON(rawJSON(`{"type":"after"}`)) }()
	select {
	case err := <-written:
		t.Fatalf("a write overtook the queued rest (%v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	for i, want := range sent {
		if got := read(t, c); !bytes.Equal(got, want) {
			t.Fatalf("message %d: read %.40s… (%d bytes), want %.40s… (%d bytes)", i, got, len(got), want, len(want))
		}
	}
	if got := read(t, c); string(got) != `{"type":"after"}` {
		t.Fatalf("after the queued frames the client read %s", got)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
}

// TestNoFramesAfterTheCloseFrame: once the close frame went out, TryWrite
// and WriteFrames refuse with ErrClosing (RFC 6455: no data after close).
func TestNoFramesAfterTheCloseFrame(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, srv := e.dial("graphql-ws")
	w := socket.WriterFor(srv.ctx)
	if err := srv.conn.WriteClose(socket.CloseForbidden, "no"); err != nil {
		t.Fatal(err)
	}
	frame := socket.AppendTextFrame(nil, []byte(`{}`))
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := w.TryWrite(frame)
		if errors.Is(err, socket.ErrClosing) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("TryWrite after the close frame: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := w.WriteFrames(frame); !errors.Is(err, socket.ErrClosing) {
		t.Fatalf("WriteFrames after the close frame: %v", err)
	}
}
