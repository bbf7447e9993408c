package e2e

import (
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"
)

// TestNoGoroutineOutlivesItsSubscription runs alone (not parallel): it opens
// subscriptions over WebSocket, ends them from the client side and checks that
// the server's goroutines for them are gone while the server still runs, then
// that shutting the server down leaves nothing behind at all.
func TestNoGoroutineOutlivesItsSubscription(t *testing.T) {
	before := goleak.IgnoreCurrent()
	ts := setup(t)
	ts.seed("HP", 5)
	var tok struct{ Token string }
	ts.mustData(ts.gql(ts.service, `mutation { issueCheckoutToken(checkoutId: "cart-A") { token } }`, nil), "issueCheckoutToken", &tok)
	for range 3 {
		a := dialWS(t, ts.url, ts.admin, false)
		a.ack()
		a.subscribe("1", stockChangedSub, map[string]any{"after": 0})
		receiveEvents(t, a, 1)
		b := dialWS(t, ts.url, tok.Token, true)
		b.ack()
		b.subscribe("1", `subscription { reservationChanged(checkoutId: "cart-A") { id } }`, nil)
		time.Sleep(50 * time.Millisecond)
		if n := subscriptionGoroutines(); n == 0 {
			t.Fatal("no subscription goroutines seen while subscribed: the check below would prove nothing")
		}
		_ = a.conn.Close(websocket.StatusNormalClosure, "done")
		_ = b.conn.Close(websocket.StatusNormalClosure, "done")
	}
	deadline := time.Now().Add(5 * time.Second)
	for subscriptionGoroutines() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := subscriptionGoroutines(); n > 0 {
		t.Fatalf("%d subscription goroutines outlived their subscriptions while the server runs", n)
	}
	if err := ts.shutdown(); err != nil {
		t.Fatal(err)
	}
	ts.db.Close()
	http.DefaultClient.CloseIdleConnections()
	if err := goleak.Find(before); err != nil {
		t.Fatalf("goroutines left after shutdown: %v", err)
	}
}

// subscriptionGoroutines counts goroutines serving a subscription: the
// broker's per-subscription stream and gqlgen's WebSocket connection.
func subscriptionGoroutines() int {
	buf := make([]byte, 1<<22)
	stacks := string(buf[:runtime.Stack(buf, true)])
	n := 0
	for _, g := range strings.Split(stacks, "\n\n") {
		if strings.Contains(g, "inventory/events.stream") || strings.Contains(g, "(*wsConnection)") {
			n++
		}
	}
	return n
}
