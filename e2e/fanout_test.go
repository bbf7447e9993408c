package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// metricValue reads one unlabelled sample from a /metrics body (-1 when
// absent).
func metricValue(body, name string) float64 {
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// waitMetric polls /metrics until name reaches want.
func (ts *testServer) waitMetric(name string, want float64) string {
	ts.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := httpGetAs(ts.t, ts.url+"/metrics", ts.admin)
		if metricValue(body, name) == want || time.Now().After(deadline) {
			if got := metricValue(body, name); got != want {
				ts.t.Fatalf("%s = %v, want %v", name, got, want)
			}
			return body
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// smallWindowDialer dials from a socket whose receive buffer is as small as
// the kernel allows, so a server writing to it soon waits for the reader.
var smallWindowDialer = &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
	return errors.Join(err, serr)
}}

// dialWSSmallWindow opens a graphql-transport-ws socket whose receive buffer
// is a few kilobytes: a client that does not read soon makes the server's
// writes to it block.
func dialWSSmallWindow(t *testing.T, url, token string) *wsClient {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DialContext: smallWindowDialer.DialContext}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/graphql", &websocket.DialOptions{HTTPClient: client, Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadLimit(1 << 20)
	t.Cleanup(func() { _ = conn.CloseNow() })
	c := &wsClient{t: t, conn: conn}
	c.send(wsMessage{Type: "connection_init", Payload: mustJSON(map[string]any{"Authorization": "Bearer " + token})})
	return c
}

// TestSlowGroupMemberIsCutOffWithItsCursor: a member of a stockChanged group
// that stops reading (its socket's window full) is cut off with the seq of
// the first event it did not get, after receiving every event before it in
// order; resuming from there gives exactly the rest. The other member gets
// every event meanwhile, in order. The fan-out's own promises are tested in
// package fanout; this is the application's: the settings reach it, the
// client is told SUBSCRIPTION_ENDED, and the broker resumes at the cursor.
func TestSlowGroupMemberIsCutOffWithItsCursor(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_SUBSCRIBER_BUFFER": "8", "INVENTORY_SUBSCRIBER_STALL_TIMEOUT": "300ms",
		// The slow client answers no ping while it does not read.
		"INVENTORY_WS_KEEPALIVE": "2m"})
	ts.seed("HP", 5)
	// Big messages (1,500 aliases of location), so that the kernel's
	// buffers (up to 4 MiB for the server's side) fill within a few hundred
	// events.
	var sub strings.Builder
	sub.WriteString(strings.TrimSuffix(stockChangedSub, " } }"))
	for i := range 1500 {
		fmt.Fprintf(&sub, " l%d: location", i)
	}
	sub.WriteString(" } }")
	// The seed's event, committed before the subscriptions, may still be
	// on its way to them (a fresh-clone CI run counted 202 of 201 events):
	// both readers leave it out.
	waitUntil(t, 10*time.Second, "the seed's event to get its seq", func() bool {
		return ts.count("SELECT count(*) FROM stock_events WHERE seq IS NULL") == 0
	})
	seeded := ts.count("SELECT max(seq) FROM stock_events")
	fast := dialWS(t, ts.url, ts.admin, false)
	fast.ack()
	fast.subscribe("f", sub.String(), map[string]any{"after": nil})
	slow := dialWSSmallWindow(t, ts.url, ts.admin)
	slow.ack()
	slow.subscribe("s", sub.String(), map[string]any{"after": nil})
	ts.waitMetric("inventory_subscription_group_members", 2)

	// Many events, 20 per request, until the slow socket's window fills and
	// its member's backlog stays past 8 for longer than 300 ms, and a few
	// more.
	const batches, per = 60, 20
	// The fast member reads all along, as a live client does: one that read
	// only between the writer's requests left its own socket full for
	// longer than the 300 ms allowed on a loaded machine, and was cut off
	// too.
	var sent atomic.Int64
	sent.Store(-1) // not known until the writes end
	fastDone := make(chan []wsEvent, 1)
	go func() {
		var got []wsEvent
		defer func() { fastDone <- got }()
		for n := sent.Load(); n < 0 || int64(len(got)) < n; n = sent.Load() {
			m, err := fast.next(10 * time.Second)
			if err != nil || m.Type != "next" {
				t.Errorf("fast member after %d events: %+v %v", len(got), m, err)
				return
			}
			var p struct {
				Data struct{ StockChanged wsEvent }
			}
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				t.Errorf("fast member: %v", err)
				return
			}
			if p.Data.StockChanged.Seq > int64(seeded) {
				got = append(got, p.Data.StockChanged)
			}
		}
	}()
	b := 0
	for after := -1; b < batches && after != 0; b, after = b+1, after-1 {
		if after < 0 {
			_, body := httpGetAs(t, ts.url+"/metrics", ts.admin)
			if metricValue(body, "inventory_subscription_members_cut_total") > 0 {
				after = 3
			}
		}
		var m strings.Builder
		m.WriteString("mutation {")
		for i := range per {
			fmt.Fprintf(&m, ` r%d: receiveStock(input: {sku: "HP", location: "AMS", quantity: 1, reference: "PO-%d-%d"}) { userErrors { code } }`, i, b, i)
		}
		m.WriteString(" }")
		ts.gql(ts.admin, m.String(), nil)
		time.Sleep(30 * time.Millisecond)
	}
	// One event more, after the count is known: a reader that had taken
	// every event before it may already be waiting for the next.
	total := b*per + 1
	sent.Store(int64(total))
	ts.gql(ts.admin, `mutation { receiveStock(input: {sku: "HP", location: "AMS", quantity: 1, reference: "PO-last"}) { userErrors { code } } }`, nil)
	fastGot := <-fastDone
	if len(fastGot) != total {
		t.Fatalf("fast member got %d of %d events", len(fastGot), total)
	}
	requireDense(t, fastGot, int64(seeded)+1)

	// Now the slow one reads: contiguous events, then the cut-off with its
	// cursor.
	var slowGot []wsEvent
	var ended string
	for ended == "" {
		m, err := slow.next(10 * time.Second)
		if err != nil {
			t.Fatalf("slow member after %d events: %v", len(slowGot), err)
		}
		switch m.Type {
		case "next":
			var p struct {
				Data struct{ StockChanged wsEvent }
			}
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if p.Data.StockChanged.Seq > int64(seeded) {
				slowGot = append(slowGot, p.Data.StockChanged)
			}
		case "error":
			ended = string(m.Payload)
		default:
			t.Fatalf("slow member: %+v", m)
		}
	}
	if len(slowGot) == 0 || len(slowGot) >= len(fastGot) {
		t.Fatalf("slow member got %d of %d events before it was cut off (%s)", len(slowGot), len(fastGot), ended)
	}
	requireDense(t, slowGot, fastGot[0].Seq)
	next := slowGot[len(slowGot)-1].Seq + 1
	if !strings.Contains(ended, "SUBSCRIPTION_ENDED") || !strings.Contains(ended, fmt.Sprintf("disconnected at seq %d;", next)) {
		t.Fatalf("cut-off message %s, want SUBSCRIPTION_ENDED at seq %d", ended, next)
	}
	t.Logf("slow member cut off after %d of %d events: %s", len(slowGot), len(fastGot), ended)

	// Resuming from its last seq continues with exactly the next event
	// (the first few are read: the broker would cut off a resumed reader
	// this slow, with these limits, too).
	again := dialWS(t, ts.url, ts.admin, false)
	again.ack()
	again.subscribe("r", sub.String(), map[string]any{"after": next - 1})
	rest := receiveEvents(t, again, 3)
	requireDense(t, rest, next)
	if rest[0] != fastGot[next-fastGot[0].Seq] {
		t.Fatalf("resumed with %+v, want %+v", rest[0], fastGot[next-fastGot[0].Seq])
	}
	_, body := httpGetAs(t, ts.url+"/metrics", ts.admin)
	if got := metricValue(body, "inventory_subscription_members_cut_total"); got != 1 {
		t.Fatalf("members cut: %v, want 1", got)
	}
}
