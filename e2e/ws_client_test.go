package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// wsClient speaks graphql-transport-ws (or the legacy graphql-ws) to the
// server, frame by frame, so tests can see exactly what the server sends.
type wsClient struct {
	t      *testing.T
	conn   *websocket.Conn
	legacy bool
	// outcomes holds what subscriptions were told while outcome waited for
	// another one: "" for data, else the refusal.
	outcomes map[string]string
}

// wsMessage is one protocol frame.
type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// dialWS opens a socket to the instance at url and sends connection_init
// with token (none when empty). It does not wait for the ack: see ack.
func dialWS(t *testing.T, url, token string, legacy bool) *wsClient {
	t.Helper()
	proto := "graphql-transport-ws"
	if legacy {
		proto = "graphql-ws"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/graphql", &websocket.DialOptions{Subprotocols: []string{proto}})
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadLimit(1 << 20)
	c := &wsClient{t: t, conn: conn, legacy: legacy}
	t.Cleanup(func() { _ = conn.CloseNow() })
	payload := map[string]any{}
	if token != "" {
		payload["Authorization"] = "Bearer " + token
	}
	c.send(wsMessage{Type: "connection_init", Payload: mustJSON(payload)})
	return c
}

// dialWSNoInit opens a graphql-transport-ws socket and sends nothing.
func dialWSNoInit(t *testing.T, url string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.CloseNow() })
	return &wsClient{t: t, conn: conn}
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

// next reads the next frame that is not a keep-alive or ping (answering
// pings), or returns the read error (a close shows up here).
func (c *wsClient) next(timeout time.Duration) (wsMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		var m wsMessage
		if err := wsjson.Read(ctx, c.conn, &m); err != nil {
			return m, err
		}
		switch m.Type {
		case "ka":
			continue
		case "ping":
			if err := wsjson.Write(ctx, c.conn, wsMessage{Type: "pong"}); err != nil {
				return m, err
			}
			continue
		case "pong":
			continue
		}
		return m, nil
	}
}

// ack waits for connection_ack.
func (c *wsClient) ack() {
	c.t.Helper()
	m, err := c.next(5 * time.Second)
	if err != nil || m.Type != "connection_ack" {
		c.t.Fatalf("want connection_ack, got %+v %v", m, err)
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

// data reads the next data frame for any operation and decodes
// payload.data[field] into v; it fails on anything else.
func (c *wsClient) data(field string, v any, timeout time.Duration) {
	c.t.Helper()
	m, err := c.next(timeout)
	if err != nil {
		c.t.Fatalf("waiting for %s: %v", field, err)
	}
	if m.Type != "next" && m.Type != "data" {
		c.t.Fatalf("want data for %s, got %s %s", field, m.Type, m.Payload)
	}
	var p struct {
		Data   map[string]json.RawMessage
		Errors []any
	}
	if err := json.Unmarshal(m.Payload, &p); err != nil || len(p.Errors) > 0 {
		c.t.Fatalf("payload %s: %v", m.Payload, err)
	}
	if err := json.Unmarshal(p.Data[field], v); err != nil {
		c.t.Fatal(err)
	}
}

// closeCode waits for the server to close the socket and returns its code.
func (c *wsClient) closeCode(timeout time.Duration) (websocket.StatusCode, string) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		_, err := c.next(time.Until(deadline))
		if err == nil {
			continue // error or complete frames may precede the close
		}
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code, ce.Reason
		}
		return -1, err.Error()
	}
	return -1, fmt.Sprintf("no close within %s", timeout)
}

// wsEvent is the part of StockEvent the tests read.
type wsEvent struct {
	Seq       int64  `json:"seq"`
	SKU       string `json:"sku"`
	Location  string `json:"location"`
	Cause     string `json:"cause"`
	OnHand    int    `json:"onHand"`
	Reserved  int    `json:"reserved"`
	Available int    `json:"available"`
}

const stockChangedSub = `subscription($after: Int64, $skus: [String!]) { stockChanged(after: $after, skus: $skus) { seq sku location cause onHand reserved available } }`
