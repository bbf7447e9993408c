package main

import (
	"net/http"
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
	http.DefaultClient.CloseIdleConnections()
	serving := goleak.IgnoreCurrent() // the running server's own goroutines

	for range 3 {
		a := dialWS(t, ts.url, ts.admin, false)
		a.ack()
		a.subscribe("1", stockChangedSub, map[string]any{"after": 0})
		receiveEvents(t, a, 1)
		b := dialWS(t, ts.url, tok.Token, true)
		b.ack()
		b.subscribe("1", `subscription { reservationChanged(checkoutId: "cart-A") { id } }`, nil)
		time.Sleep(50 * time.Millisecond)
		_ = a.conn.Close(websocket.StatusNormalClosure, "done")
		_ = b.conn.Close(websocket.StatusNormalClosure, "done")
	}
	if err := goleak.Find(serving); err != nil {
		t.Fatalf("subscriptions left goroutines behind while the server runs: %v", err)
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
