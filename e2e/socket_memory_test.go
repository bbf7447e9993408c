package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// What one idle WebSocket with one availabilityChanged subscription may
// cost the server: resident memory and goroutines. Measured here: about
// 50 KiB (25 KiB of goroutine stacks, 22 KiB of heap) and 3 goroutines,
// all of them gqlgen's transport (its read loop, its close-on-cancel
// goroutine, the subscription's goroutine, which only waits while the
// fan-out's writer pool delivers); the keep-alive is a timer. Before the
// pool and the timer, 62 KiB and 4 goroutines; before subscriptions were
// grouped, 75 KiB and 6 (each subscription also had a broker stream and a
// push loop).
//
// The bound is on what the Go runtime holds for them (goroutine stacks and
// heap in use), which a GC settles; RSS also holds pages freed but not yet
// returned to the kernel, which the scavenger hands back on a schedule of
// its own, so it gets a looser bound of its own: a fresh-clone CI run
// measured 60.6 KB of RSS for 49.1 KB held.
const (
	idleSocketHeld       = 54 << 10
	idleSocketRSS        = 72 << 10
	idleSocketGoroutines = 3.1
)

// TestIdleSocketCost runs the real binary, opens 1,500 sockets each with the
// same availabilityChanged subscription (one group), and measures what they
// cost the server per socket: RSS and goroutines, after a GC settles (the
// figures are logged).
func TestIdleSocketCost(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pprofAddr := l.Addr().String()
	l.Close()
	bs := setupBinary(t, map[string]string{
		// 1,500 sockets from one address: past the per-address connection
		// bound (TestConnectionsPerAddressAreBounded), which is not measured here.
		"INVENTORY_MAX_CONNS_PER_IP":             "0",
		"INVENTORY_PPROF_ADDR":                   pprofAddr, // to collect garbage before each measure
		"INVENTORY_MAX_SUBSCRIPTIONS_PER_CALLER": "1000000",
		"INVENTORY_RATE_LIMIT_ANONYMOUS_READS":   "1000000000", // each handshake is one
		"INVENTORY_ANONYMOUS_MAX_SOCKETS":        "1000000",
		"INVENTORY_WS_KEEPALIVE":                 "30s",
	})
	bs.seed("HOT", 100)
	metric := func(name string) float64 {
		_, body := httpGetAs(t, bs.url+"/metrics", bs.admin)
		return metricValue(body, name)
	}
	settle := func() {
		for range 2 {
			resp, err := http.Get("http://" + pprofAddr + "/debug/pprof/heap?gc=1")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		time.Sleep(200 * time.Millisecond)
	}
	settle()
	rss0, g0 := bs.rss(), metric("go_goroutines")
	stack0, heap0 := metric("go_memstats_stack_inuse_bytes"), metric("go_memstats_heap_inuse_bytes")

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
	settle()
	rss, g := bs.rss(), metric("go_goroutines")
	stack, heap := metric("go_memstats_stack_inuse_bytes"), metric("go_memstats_heap_inuse_bytes")
	perSocket := (rss - rss0) / sockets
	perSocketG := (g - g0) / sockets
	t.Logf("%d idle sockets: RSS %d → %d MB, %d bytes per socket; goroutines %v → %v, %.2f per socket",
		sockets, rss0>>20, rss>>20, perSocket, g0, g, perSocketG)
	held := (stack - stack0 + heap - heap0) / sockets
	t.Logf("per socket: %.0f bytes of goroutine stacks, %.0f of heap in use", (stack-stack0)/sockets, (heap-heap0)/sockets)
	if held > idleSocketHeld {
		t.Errorf("an idle socket holds %.0f bytes of stacks and heap, want at most %d", held, idleSocketHeld)
	}
	if perSocket > idleSocketRSS {
		t.Errorf("an idle socket costs %d bytes of RSS, want at most %d", perSocket, idleSocketRSS)
	}
	if perSocketG > idleSocketGoroutines {
		t.Errorf("an idle socket costs %.2f goroutines, want at most %v", perSocketG, idleSocketGoroutines)
	}
}
