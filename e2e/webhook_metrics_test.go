package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"inventory/testkit"
)

// Deliveries are counted on /metrics by outcome, and the delivery lag is
// read from the database at each scrape.
func TestWebhookMetrics(t *testing.T) {
	ts := setupWith(t, map[string]string{"INVENTORY_WEBHOOK_ALLOW_PRIVATE": "true"})
	var got atomic.Int64
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(recv.Close)

	metric := func(re string) (float64, bool) {
		code, body := httpGetAs(t, ts.url+"/metrics", ts.admin)
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d", code)
		}
		m := regexp.MustCompile(`(?m)^` + re + ` (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		return v, true
	}
	if v, ok := metric(`inventory_webhook_lag_events`); !ok || v != 0 {
		t.Fatalf("lag without endpoints: %v %v", v, ok)
	}
	if v, ok := metric(`inventory_webhook_endpoints_paused`); !ok || v != 0 {
		t.Fatalf("paused without endpoints: %v %v", v, ok)
	}
	if v, ok := metric(`inventory_webhook_deliveries_total\{outcome="delivered"\}`); !ok || v != 0 {
		t.Fatalf("delivered before any: %v %v", v, ok)
	}

	var p webhookPayloadJSON
	ts.mustData(ts.gql(ts.admin, `mutation($u: String!) { createWebhook(input: {url: $u, topics: [STOCK_CHANGED]}) { secret webhook { id } userErrors { code } } }`,
		map[string]any{"u": recv.URL + "/h"}), "createWebhook", &p)
	if p.Webhook == nil || len(p.UserErrors) != 0 {
		t.Fatalf("create: %+v", p)
	}
	ts.seed("WH-METRICS", 3)
	waitUntil(t, 20*time.Second, "a delivery counted", func() bool {
		v, _ := metric(`inventory_webhook_deliveries_total\{outcome="delivered"\}`)
		return got.Load() > 0 && v > 0
	})
	waitUntil(t, 20*time.Second, "the lag back to 0", func() bool {
		v, ok := metric(`inventory_webhook_lag_events`)
		return ok && v == 0
	})

	// A paused endpoint's cursor is left out of the lag.
	ts.mustData(ts.gql(ts.admin, `mutation($id: ID!) { pauseWebhook(id: $id) { webhook { id } userErrors { code } } }`,
		map[string]any{"id": p.Webhook.ID}), "pauseWebhook", &p)
	ts.mustData(ts.gql(ts.admin, `mutation { receiveStock(input: {sku: "WH-METRICS", location: "AMS", quantity: 1, reference: "PO-2"}) { userErrors { code } } }`, nil),
		"receiveStock", new(map[string]any))
	waitUntil(t, 20*time.Second, "the paused endpoint behind", func() bool {
		return ts.count("SELECT (SELECT last_seq FROM stock_events_head) - cursor_seq FROM webhook_endpoints") > 0
	})
	if v, ok := metric(`inventory_webhook_lag_events`); !ok || v != 0 {
		t.Fatalf("lag with only a paused endpoint: %v %v", v, ok)
	}
	if v, ok := metric(`inventory_webhook_endpoints_paused`); !ok || v != 1 {
		t.Fatalf("paused endpoints: %v %v", v, ok)
	}

	// An endpoint that is not paused but behind (its receiver is holding the
	// first delivery) shows in the lag: head minus its cursor, above 0; once
	// the receiver answers, the lag is 0 again.
	slow := testkit.NewWebhookReceiver(t)
	held := slow.HoldNext()
	ts.mustData(ts.gql(ts.admin, `mutation($u: String!) { createWebhook(input: {url: $u, topics: [STOCK_CHANGED]}) { webhook { id } userErrors { code } } }`,
		map[string]any{"u": slow.URL}), "createWebhook", &p)
	for i := range 3 {
		ts.mustData(ts.gql(ts.admin, `mutation($r: String!) { receiveStock(input: {sku: "WH-METRICS", location: "AMS", quantity: 1, reference: $r}) { userErrors { code } } }`,
			map[string]any{"r": fmt.Sprint("PO-slow-", i)}), "receiveStock", new(map[string]any))
	}
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery to the slow receiver")
	}
	behind := `SELECT (SELECT last_seq FROM stock_events_head) - cursor_seq FROM webhook_endpoints WHERE id = '` + p.Webhook.ID + `'`
	waitUntil(t, 20*time.Second, "the lag of the endpoint that is behind", func() bool {
		v, ok := metric(`inventory_webhook_lag_events`)
		return ok && v == 3 && ts.count(behind) == 3
	})
	slow.Release()
	waitUntil(t, 20*time.Second, "the lag back to 0 after the slow receiver answered", func() bool {
		v, ok := metric(`inventory_webhook_lag_events`)
		return ok && v == 0
	})
}
