package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestSubscribersThatNeverReadAreDropped is the attack of clients that
// subscribe and never read, against the real binary: one over SSE, one over
// a WebSocket that answers the keep-alive with unsolicited pongs, each
// replaying 30,000 stock events into a 4 KB receive window. Before, both
// stayed connected as long as they liked, each holding its goroutines and a
// kernel send buffer (100 such sockets pinned 177 MB). Now an SSE write
// that has not gone out within the subscriber stall timeout ends the
// stream, and a WebSocket whose peer acknowledged none of the bytes waiting
// for it for two keep-alive intervals is closed, whether a write is blocked
// or the bytes merely sit in the kernel's buffer (under load, the broker cut
// the subscription before the buffer filled, and the pings still fit).
func TestSubscribersThatNeverReadAreDropped(t *testing.T) {
	t.Parallel()
	s := setupBinary(t, map[string]string{"INVENTORY_SUBSCRIBER_STALL_TIMEOUT": "1s", "INVENTORY_WS_KEEPALIVE": "500ms"})
	codes := seedSKUs(t, s.testServer, 1000)
	for round := 1; round < 30; round++ { // 30,000 events: about 4.5 MB to replay
		levels := make([]map[string]any, len(codes))
		for i, code := range codes {
			levels[i] = map[string]any{"sku": code, "location": "AMS", "onHand": 100 + i + round}
		}
		var p struct{ UserErrors []any }
		s.mustData(s.gql(s.admin, `mutation($in: SetStockLevelsInput!) { setStockLevels(input: $in) { userErrors { code message } } }`,
			map[string]any{"in": map[string]any{"reference": fmt.Sprint("count-", round), "levels": levels}}), "setStockLevels", &p)
		if len(p.UserErrors) > 0 {
			t.Fatalf("setStockLevels: %v", p.UserErrors)
		}
	}
	sub := `subscription { stockChanged(after: 0) { seq sku location cause onHand reserved available } }`

	// SSE, by hand: the request goes out, the answer is never read.
	sse, err := smallWindowDialer.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer sse.Close()
	body := string(mustJSON(map[string]any{"query": sub}))
	fmt.Fprintf(sse, "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s",
		s.admin, len(body), body)

	// A WebSocket that pongs and never reads.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wsAddr net.Addr
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := smallWindowDialer.DialContext(ctx, network, addr)
		if err == nil {
			wsAddr = c.LocalAddr()
		}
		return c, err
	}
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.url, "http")+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"},
		HTTPClient:   &http.Client{Transport: &http.Transport{DialContext: dial}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	c := &wsClient{t: t, conn: ws}
	c.send(wsMessage{Type: "connection_init", Payload: mustJSON(map[string]any{"Authorization": "Bearer " + s.admin})})
	c.ack()
	c.subscribe("1", sub, nil)
	pongs, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		for pongs.Err() == nil {
			wctx, cancel := context.WithTimeout(pongs, time.Second)
			err := ws.Write(wctx, websocket.MessageText, []byte(`{"type":"pong"}`))
			cancel()
			if err != nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()

	// The server's end of each connection, seen from the kernel: closed by
	// the server (FIN_WAIT1 while the unread bytes wait, or gone) within
	// a few seconds of its stall bound, never left ESTABLISHED.
	server := strings.TrimPrefix(s.url, "http://")
	for name, client := range map[string]net.Addr{"SSE": sse.LocalAddr(), "WebSocket": wsAddr} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			st := tcpState(t, server, client.String())
			if st != "ESTABLISHED" && st != "CLOSE_WAIT" {
				t.Logf("%s: the server's end is %s", name, st)
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: a subscriber that never reads still has its connection (%s) 10s after it stopped reading", name, st)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// tcpState is the state of the TCP socket from local to remote (addresses
// as 127.0.0.1:port) in /proc/net/tcp, or "gone".
func tcpState(t *testing.T, local, remote string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	hexAddr := func(a string) string {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			t.Fatal(err)
		}
		ip := ap.Addr().As4()
		return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], ap.Port())
	}
	l, r := hexAddr(local), hexAddr(remote)
	states := map[string]string{"01": "ESTABLISHED", "04": "FIN_WAIT1", "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE",
		"08": "CLOSE_WAIT", "09": "LAST_ACK", "0B": "CLOSING"}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[1] == l && f[2] == r {
			if st, ok := states[f[3]]; ok {
				return st
			}
			return f[3]
		}
	}
	return "gone"
}
