package socket

import (
	"bytes"
	"context"
	"time"

	"github.com/coder/websocket"
)

// keepAlive is the socket's keep-alive on a timer, in place of gqlgen's,
// which holds a goroutine (and a ticker) per socket for its whole life: a
// product page's idle socket should cost little. It does what gqlgen's
// does (Websocket.KeepAlivePingInterval and PingPongInterval, which are
// then left 0), from the connection_ack on:
//
//   - graphql-ws: a {"type":"ka"} every interval;
//   - graphql-transport-ws: a {"type":"ping"} every interval, and a peer that
//     does not answer with a pong is dropped: the read deadline is two
//     intervals from the ack, cleared by each pong, and set two intervals
//     ahead again at a ping only if a pong came since the one before.
//
// Either way, a peer that reads nothing is dropped too: at each tick the
// bytes it acknowledged are compared with the last tick's, and a peer that
// left bytes waiting and acknowledged none of them for two ticks is cut
// off, whatever pongs it sends (a pong proves the peer writes, not that it
// reads) and however little the server has to write to it meanwhile. A
// peer that reads slowly acknowledges something every tick.
type keepAlive struct {
	interval time.Duration
	timer    *time.Timer // under conn.mu; nil until the ack, or after close
	pong     bool        // under conn.mu: a pong came since the last ping
	acked    bool        // under conn.mu: the connection_ack went out
	// Touched by the tick alone (ticks never overlap: each arms the next).
	lastAcked int64 // the bytes the peer had acknowledged at the last tick
	stuck     int   // ticks in a row that found bytes waiting and none acknowledged
}

var (
	ackType  = []byte(`"type":"connection_ack"`)
	pingMsg  = []byte(`{"type":"ping"}`)
	kaMsg    = []byte(`{"type":"ka"}`)
	pongType = "pong"
)

// wrote starts the keep-alive once msg, written by gqlgen, is the
// connection_ack.
func (c *conn) wrote(msg []byte) {
	if c.keep.interval <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keep.acked || c.closeHandshke != nil || !bytes.Contains(msg, ackType) {
		return
	}
	c.keep.acked = true
	if c.Subprotocol() == "graphql-transport-ws" {
		c.setReadDeadlineLocked(time.Now().Add(2 * c.keep.interval))
	}
	c.keep.timer = time.AfterFunc(c.keep.interval, c.keepAliveTick)
}

// keepAliveTick drops a peer that stopped reading, else sends the ping (or
// ka) and arms the next.
func (c *conn) keepAliveTick() {
	if acked, waiting, ok := c.raw.acked(); ok {
		if waiting && acked == c.keep.lastAcked {
			c.keep.stuck++
		} else {
			c.keep.stuck = 0
		}
		c.keep.lastAcked = acked
		if c.keep.stuck >= 2 {
			_ = c.raw.Conn.Close() // its reader ends the socket
			return
		}
	}
	pingPong := c.Subprotocol() == "graphql-transport-ws"
	msg := kaMsg
	if pingPong {
		msg = pingMsg
	}
	// An error means the socket is gone: its reader ends it.
	_ = c.writeText(msg)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keep.timer == nil {
		return // closed meanwhile
	}
	if pingPong {
		if c.keep.pong {
			c.setReadDeadlineLocked(time.Now().Add(2 * c.keep.interval))
		}
		c.keep.pong = false
	}
	c.keep.timer.Reset(c.keep.interval)
}

// ponged notes a pong from the peer, which clears the read deadline.
func (c *conn) ponged() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keep.pong = true
	c.setReadDeadlineLocked(time.Time{})
}

// writeText writes one text message, corked so that it leaves in one
// system call.
func (c *conn) writeText(b []byte) error {
	c.raw.cork()
	err := c.ws.Write(context.Background(), websocket.MessageText, b)
	if uerr := c.raw.uncork(); err == nil {
		err = uerr
	}
	return err
}
