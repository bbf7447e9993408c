package socket

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"
)

// conn is the server's end of one GraphQL WebSocket: coder/websocket under
// gqlgen's transport (which reads and writes it message by message), plus
// WriteMessages, which writes many ready-made text messages in one system
// call (fan-out: a subscriber's pending messages leave together).
type conn struct {
	ws   *websocket.Conn
	raw  *corkConn
	hold *holder

	mu            sync.Mutex
	deadline      *time.Timer   // SetReadDeadline's: closes the socket when it fires
	closeHandshke chan struct{} // set once WriteClose started the close handshake
	keep          keepAlive
}

var (
	_ transport.WebsocketConn          = (*conn)(nil)
	_ transport.WebsocketReadLimiter   = (*conn)(nil)
	_ transport.WebsocketReadDeadliner = (*conn)(nil)
)

// accept upgrades the request (the origin check and subprotocol choice are
// coder/websocket's) on a connection whose writes can be corked.
func accept(w http.ResponseWriter, r *http.Request, base websocket.AcceptOptions, opts transport.WebsocketAcceptOptions, h *holder, keepInterval time.Duration) (*conn, error) {
	for key, values := range opts.ResponseHeader {
		for _, v := range values {
			w.Header().Add(key, v)
		}
	}
	accept := base
	accept.Subprotocols = slices.Clone(base.Subprotocols)
	for _, p := range opts.Subprotocols {
		if !slices.Contains(accept.Subprotocols, p) {
			accept.Subprotocols = append(accept.Subprotocols, p)
		}
	}
	// A peer that takes no byte for two keep-alive intervals is as dead as
	// one that leaves a ping unanswered that long.
	hj := &corkingHijacker{ResponseWriter: w, stallAfter: 2 * keepInterval}
	ws, err := websocket.Accept(hj, r, &accept)
	if err != nil {
		return nil, err
	}
	return &conn{ws: ws, raw: hj.conn, hold: h, keep: keepAlive{interval: keepInterval}}, nil
}

// NextReader reads the next message. A subscription's start message also
// tells the holder its operation id (see OperationIDs), which gqlgen does
// not pass on to the operation.
func (c *conn) NextReader() (int, io.Reader, error) {
	typ, data, err := c.ws.Read(context.Background())
	if err != nil {
		switch websocket.CloseStatus(err) {
		case websocket.StatusNormalClosure, websocket.StatusNoStatusRcvd:
			return int(typ), nil, transport.ErrWebsocketClosed
		}
		return int(typ), nil, err
	}
	var m struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	if json.Unmarshal(data, &m) == nil {
		if c.hold != nil && (m.Type == "subscribe" || m.Type == "start") {
			c.hold.mu.Lock()
			c.hold.startID = m.ID
			c.hold.mu.Unlock()
		}
		if m.Type == pongType {
			c.ponged()
		}
	}
	return int(typ), bytes.NewReader(data), nil
}

// WriteJSON writes one message, as gqlgen's transport does for everything
// but fanned-out subscription data.
func (c *conn) WriteJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode a message: %w", err)
	}
	// Corked: a message bigger than the write buffer still leaves in one
	// system call with its frame header.
	err = c.writeText(b)
	c.wrote(b)
	return err
}

// WriteMessages writes each message of msgs as a text message, all in one
// system call where they fit the corked buffer: the peer gets a batch per
// flush instead of a write per message.
func (c *conn) WriteMessages(msgs func(yield func([]byte) bool)) error {
	c.raw.cork()
	var err error
	for m := range msgs {
		if err = c.ws.Write(context.Background(), websocket.MessageText, m); err != nil {
			break
		}
	}
	if uerr := c.raw.uncork(); err == nil {
		err = uerr
	}
	return err
}

// TryWrite writes ready-made frames (AppendTextFrame) without waiting for
// the socket: see TryResult. frames must not change afterwards (a drain
// may write from it); fan-out writes the same bytes to many sockets.
func (c *conn) TryWrite(frames []byte) (TryResult, error) { return c.raw.tryWrite(frames) }

// WriteFrames writes ready-made frames, waiting for the socket.
func (c *conn) WriteFrames(frames []byte) error { return c.raw.writeFrames(frames) }

// WriteClose starts the close handshake in the background: coder/websocket
// waits up to 5 s for the peer's close frame, which must not hold up the
// transport's teardown.
func (c *conn) WriteClose(code int, reason string) error {
	c.stopDeadline()
	c.mu.Lock()
	if c.closeHandshke != nil {
		c.mu.Unlock()
		return nil
	}
	done := make(chan struct{})
	c.closeHandshke = done
	c.mu.Unlock()
	go func() {
		defer close(done)
		_ = c.ws.Close(websocket.StatusCode(code), reason)
	}()
	return nil
}

// Close drops the connection, unless a close handshake (WriteClose) owns
// its end already.
func (c *conn) Close() error {
	c.stopDeadline()
	c.mu.Lock()
	handshake := c.closeHandshke != nil
	c.mu.Unlock()
	if handshake {
		return nil
	}
	return c.ws.CloseNow()
}

// Subprotocol is the negotiated subprotocol.
func (c *conn) Subprotocol() string { return c.ws.Subprotocol() }

// SetReadLimit bounds a message from the client.
func (c *conn) SetReadLimit(limit int64) { c.ws.SetReadLimit(limit) }

// SetReadDeadline closes the socket at t unless it is set again first (the
// ping/pong check); the zero time clears it.
func (c *conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.setReadDeadlineLocked(t)
}

func (c *conn) setReadDeadlineLocked(t time.Time) error {
	if c.deadline != nil {
		c.deadline.Stop()
		c.deadline = nil
	}
	if t.IsZero() {
		return nil
	}
	d := time.Until(t)
	if d <= 0 {
		return c.ws.CloseNow()
	}
	c.deadline = time.AfterFunc(d, func() { _ = c.ws.CloseNow() })
	return nil
}

// stopDeadline stops the read deadline and the keep-alive: the socket is
// closing.
func (c *conn) stopDeadline() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deadline != nil {
		c.deadline.Stop()
		c.deadline = nil
	}
	if c.keep.timer != nil {
		c.keep.timer.Stop()
		c.keep.timer = nil
	}
}

// corkingHijacker hands coder/websocket a connection whose writes can be
// held back and sent together (corkConn).
type corkingHijacker struct {
	http.ResponseWriter
	stallAfter time.Duration // corkConn's
	conn       *corkConn
}

func (h *corkingHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	// Small buffers in place of net/http's 4 KiB ones, which an idle socket
	// would hold for its whole life: writes are batched by corking (a
	// payload bigger than the buffer goes straight to corkConn), and what a
	// client sends is small. Bytes net/http had read past the handshake are
	// the first corkConn reads.
	pending, _ := brw.Reader.Peek(brw.Reader.Buffered())
	h.conn = newCorkConn(nc, bytes.Clone(pending), h.stallAfter)
	// brw's reader and writer are net/http's own, which its connection
	// keeps for as long as the handler runs: the socket's whole life, as
	// gqlgen reads on the handler's goroutine. Nothing uses them after the
	// hijack, so they let go of their buffers (8 KiB a socket).
	*brw.Reader, *brw.Writer = bufio.Reader{}, bufio.Writer{}
	return h.conn, bufio.NewReadWriter(bufio.NewReaderSize(h.conn, socketReadBuffer), bufio.NewWriterSize(h.conn, socketWriteBuffer)), nil
}

// Per-socket buffer sizes (see corkingHijacker.Hijack).
const (
	socketReadBuffer  = 1 << 10
	socketWriteBuffer = 256
)
