package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestBrokerOutageReadinessAndResume starts an instance whose event broker
// cannot start (the relay's head table is unreadable): its /readyz answers
// 503 with the reason (in words, no SQL) while it retries, and a subscriber
// that connected meanwhile waits instead of ending quietly. Once the table
// is back the instance becomes ready by itself and the subscriber receives
// every event in order, without a gap.
func TestBrokerOutageReadinessAndResume(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 10)
	if _, err := ts.db.Exec(t.Context(), "ALTER TABLE stock_events_head RENAME TO stock_events_head_gone"); err != nil {
		t.Fatal(err)
	}
	broken, _ := ts.startInstanceUnready()
	var body string
	waitUntil(t, 5*time.Second, "readiness to report the broken event stream", func() bool {
		var code int
		code, body = httpGet(t, broken+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "live events unavailable") && !strings.Contains(body, "starting")
	})
	// In words: PostgreSQL's error (the relation, its SQLSTATE) is in the
	// log, not in an answer anyone may ask for.
	t.Logf("readyz: %q", body)
	if strings.Contains(body, "SQLSTATE") || strings.Contains(body, "stock_events_head") {
		t.Errorf("/readyz names the database's error: %q", body)
	}
	c := dialWS(t, broken, ts.admin, false)
	c.ack()
	c.subscribe("1", `subscription { stockChanged(after: 0) { seq sku cause } }`, nil)

	if _, err := ts.db.Exec(t.Context(), "ALTER TABLE stock_events_head_gone RENAME TO stock_events_head"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 15*time.Second, "the instance to become ready again", func() bool {
		code, _ := httpGet(t, broken+"/readyz")
		return code == http.StatusOK
	})
	var p map[string]any
	ts.mustData(ts.gql(ts.admin, `mutation { receiveStock(input: {sku: "HP", location: "AMS", quantity: 1, reference: "PO-2"}) { userErrors { code } } }`, nil), "receiveStock", &p)
	// seeding wrote 1 event, this receive 1 more: the subscriber gets 1, 2.
	requireDense(t, receiveEvents(t, c, 2), 1)
}
