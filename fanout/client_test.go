package fanout_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// wsClient speaks graphql-transport-ws (or the legacy graphql-ws) frame by
// frame, so a test sees exactly what each subscriber is sent.
type wsClient struct {
	t      *testing.T
	conn   *websocket.Conn
	legacy bool
}

// wsMessage is one protocol frame.
type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// dial opens a socket as caller (anonymous when empty), sends
// connection_init and waits for the ack. A small window (and a small send
// buffer at the server's end, see slowSockets) makes the server's writes
// block as soon as the client stops reading.
func (e *env) dial(caller string, legacy, smallWindow bool) *wsClient {
	e.t.Helper()
	proto := "graphql-transport-ws"
	if legacy {
		proto = "graphql-ws"
	}
	opts := &websocket.DialOptions{Subprotocols: []string{proto}}
	if smallWindow {
		dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
			return errors.Join(err, serr)
		}}
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err == nil {
				e.slowClients.Store(c.LocalAddr().String(), true)
			}
			return c, err
		}
		opts.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: dial}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.url, "http"), opts)
	if err != nil {
		e.t.Fatal(err)
	}
	conn.SetReadLimit(8 << 20)
	e.t.Cleanup(func() { _ = conn.CloseNow() })
	c := &wsClient{t: e.t, conn: conn, legacy: legacy}
	c.send(wsMessage{Type: "connection_init", Payload: mustJSON(map[string]any{"caller": caller})})
	if m, err := c.next(5 * time.Second); err != nil || m.Type != "connection_ack" {
		e.t.Fatalf("want connection_ack, got %+v %v", m, err)
	}
	return c
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func (c *wsClient) send(m wsMessage) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := wsjson.Write(ctx, c.conn, m); err != nil {
		c.t.Fatal(err)
	}
}

// subscribe starts operation id.
func (c *wsClient) subscribe(id, query string, vars map[string]any) {
	c.t.Helper()
	typ := "subscribe"
	if c.legacy {
		typ = "start"
	}
	c.send(wsMessage{ID: id, Type: typ, Payload: mustJSON(map[string]any{"query": query, "variables": vars})})
}

// next reads the next frame that is not a keep-alive, or the read error.
func (c *wsClient) next(timeout time.Duration) (wsMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		var m wsMessage
		if err := wsjson.Read(ctx, c.conn, &m); err != nil {
			return m, err
		}
		if m.Type != "ka" {
			return m, nil
		}
	}
}

// data reads the next frame, which must be data for operation id, and
// decodes its payload's data[field] into v.
func (c *wsClient) data(id, field string, v any) {
	c.t.Helper()
	m, err := c.next(10 * time.Second)
	if err != nil {
		c.t.Fatalf("waiting for %s data: %v", id, err)
	}
	want := "next"
	if c.legacy {
		want = "data"
	}
	if m.Type != want || m.ID != id {
		c.t.Fatalf("want %s for %s, got %+v", want, id, m)
	}
	decodeField(c.t, m.Payload, field, v)
}

// decodeField decodes payload.data[field] into v; a payload with errors
// fails the test.
func decodeField(t *testing.T, payload []byte, field string, v any) {
	t.Helper()
	var p struct {
		Data   map[string]json.RawMessage
		Errors []any
	}
	if err := json.Unmarshal(payload, &p); err != nil || len(p.Errors) > 0 {
		t.Fatalf("payload %s: %v", payload, err)
	}
	if err := json.Unmarshal(p.Data[field], v); err != nil {
		t.Fatalf("payload %s: %v", payload, err)
	}
}

// sse is a subscription over SSE.
type sse struct {
	t  *testing.T
	sc *bufio.Scanner
}

// openSSE starts a subscription over SSE as caller (anonymous when
// empty); it ends with the test.
func (e *env) openSSE(caller, query string, vars map[string]any) *sse {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(mustJSON(map[string]any{"query": query, "variables": vars})))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if caller != "" {
		req.Header.Set("X-Caller", caller)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 8<<20)
	return &sse{t: e.t, sc: sc}
}

// next reads the payloads of n "event: next" messages; ended is true if the
// stream completed first.
func (s *sse) next(n int) (payloads [][]byte, ended bool) {
	s.t.Helper()
	event := ""
	for len(payloads) < n && s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
			if event == "complete" {
				return payloads, true
			}
		case strings.HasPrefix(line, "data: ") && event == "next":
			payloads = append(payloads, []byte(strings.TrimPrefix(line, "data: ")))
		}
	}
	if err := s.sc.Err(); err != nil {
		s.t.Fatalf("SSE after %d messages: %v", len(payloads), err)
	}
	return payloads, len(payloads) < n
}

// stockEvent is the part of Event the stockChanged tests select.
type stockEvent struct {
	Seq    int64  `json:"seq"`
	SKU    string `json:"sku"`
	Viewer string `json:"viewer"`
}

const stockChanged = `subscription($after: Int, $skus: [String!]) { stockChanged(after: $after, skus: $skus) { seq sku location available onHand viewer } }`

// requireDense fails unless events have consecutive seqs from from.
func requireDense(t *testing.T, events []stockEvent, from int64) {
	t.Helper()
	for i, e := range events {
		if e.Seq != from+int64(i) {
			t.Fatalf("event %d has seq %d, want %d (got %d events from %d)", i, e.Seq, from+int64(i), len(events), from)
		}
	}
}
