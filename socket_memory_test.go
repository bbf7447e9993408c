package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// idleSocketBudget bounds what one idle WebSocket with one availabilityChanged
// subscription may cost the server: resident memory and goroutines. Most of
// it is gqlgen's transport (its read loop, ping and close-on-cancel
// goroutines, the subscription's goroutine) and the connection's buffers;
// the subscription itself is a member of its group (no broker stream, no
// push loop of its own).
const (
	idleSocketBytes      = 48 << 10
	idleSocketGoroutines = 5
)

// TestIdleSocketCost runs the real binary, opens 1,500 sockets each with the
// same availabilityChanged subscription (one group), and measures what they
// cost the server per socket: RSS and goroutines, after a GC settles (the
// figures are logged).
func TestIdleSocketCost(t *testing.T) {
	t.Parallel()
	bs := setupBinary(t, map[string]string{
		"INVENTORY_MAX_SUBSCRIPTIONS_PER_CALLER": "1000000",
		"INVENTORY_WS_KEEPALIVE":                 "30s",
	})
	bs.seed("HOT", 100)
	metric := func(name string) float64 {
		_, body := httpGetAs(t, bs.url+"/metrics", bs.admin)
		return metricValue(body, name)
	}
	time.Sleep(500 * time.Millisecond)
	rss0, g0 := bs.rss(), metric("go_goroutines")

	const sockets = 1500
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conns := make([]*websocket.Conn, 0, sockets)
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.CloseNow()
		}
	})
	for i := range sockets {
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(bs.url, "http")+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
		if err != nil {
			t.Fatalf("socket %d: %v", i, err)
		}
		conns = append(conns, c)
		for _, m := range []wsMessage{
			{Type: "connection_init", Payload: mustJSON(map[string]any{"Authorization": "Bearer " + bs.admin})},
			{ID: "1", Type: "subscribe", Payload: mustJSON(map[string]any{"query": `subscription { availabilityChanged(skus: ["HOT"]) { sku available } }`})},
		} {
			if err := wsjson.Write(ctx, c, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Each socket gets its ack and its first value: everything is set up.
	for i, c := range conns {
		for got := false; !got; {
			var m wsMessage
			if err := wsjson.Read(ctx, c, &m); err != nil {
				t.Fatalf("socket %d: %v", i, err)
			}
			if m.Type == "next" {
				var p struct {
					Data struct{ AvailabilityChanged struct{ Available int } }
				}
				if err := json.Unmarshal(m.Payload, &p); err != nil || p.Data.AvailabilityChanged.Available != 100 {
					t.Fatalf("socket %d first value %s", i, m.Payload)
				}
				got = true
			}
		}
	}
	if n := metric("inventory_subscription_groups"); n != 1 {
		t.Fatalf("%v groups for %d identical subscriptions, want 1", n, sockets)
	}
	time.Sleep(time.Second) // let the server's GC settle
	rss, g := bs.rss(), metric("go_goroutines")
	perSocket := (rss - rss0) / sockets
	perSocketG := (g - g0) / sockets
	t.Logf("%d idle sockets: RSS %d → %d MB, %d bytes per socket; goroutines %v → %v, %.2f per socket",
		sockets, rss0>>20, rss>>20, perSocket, g0, g, perSocketG)
	if perSocket > idleSocketBytes {
		t.Errorf("an idle socket costs %d bytes of RSS, want at most %d", perSocket, idleSocketBytes)
	}
	if perSocketG > idleSocketGoroutines {
		t.Errorf("an idle socket costs %.2f goroutines, want at most %d", perSocketG, idleSocketGoroutines)
	}
}
