package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"inventory/testkit"
)

// A server shut down while a webhook delivery is in flight (the receiver
// has not answered) cancels it after the jobs' half of the shutdown budget,
// records no failure and spends no retry; the next instance on the same
// database delivers from that same event, with the same webhook-id, and
// every later event follows in seq order: nothing lost, nothing reordered.
func TestWebhookRestartMidDelivery(t *testing.T) {
	ts := setupWith(t, map[string]string{"INVENTORY_WEBHOOK_ALLOW_PRIVATE": "true", "INVENTORY_SHUTDOWN_TIMEOUT": "4s"})
	rcv := testkit.NewWebhookReceiver(t)
	var p webhookPayloadJSON
	ts.mustData(ts.gql(ts.admin, `mutation($u: String!) { createWebhook(input: {url: $u, topics: [STOCK_CHANGED], skus: ["WH-RESTART"]}) { webhook { id } userErrors { code } } }`,
		map[string]any{"u": rcv.URL}), "createWebhook", &p)
	if p.Webhook == nil {
		t.Fatalf("create: %+v", p)
	}
	receive := func(ref string) {
		t.Helper()
		ts.mustData(ts.gql(ts.admin, `mutation($r: String!) { receiveStock(input: {sku: "WH-RESTART", location: "AMS", quantity: 1, reference: $r}) { userErrors { code } } }`,
			map[string]any{"r": ref}), "receiveStock", new(map[string]any))
	}

	held := rcv.HoldNext()
	ts.seed("WH-RESTART", 1)
	for i := range 5 {
		receive(fmt.Sprint("before-", i))
	}
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery arrived")
	}
	began := time.Now()
	if err := ts.shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if took := time.Since(began); took > 4*time.Second {
		t.Fatalf("shutdown took %v with a delivery in flight, past INVENTORY_SHUTDOWN_TIMEOUT=4s", took)
	}
	if reqs := rcv.Requests(); len(reqs) != 1 || reqs[0].Status != 0 {
		t.Fatalf("the held delivery was not cut off by the shutdown: %+v", reqs)
	}

	ts.url, ts.shutdown = ts.startInstance()
	rcv.Release()
	for i := range 5 {
		receive(fmt.Sprint("after-", i))
	}
	var problem string
	waitUntil(t, 30*time.Second, "every event delivered", func() bool {
		want := testkit.PublishedSeqs(t, ts.db, "WH-RESTART")
		problem = testkit.WebhookOrderProblem(rcv.Requests(), want)
		return len(want) == 11 && problem == ""
	})
	if reqs := rcv.Requests(); reqs[1].ID != reqs[0].ID {
		t.Fatalf("after the restart the first delivery was %s, not the cut-off %s again", reqs[1].ID, reqs[0].ID)
	}
	if n := ts.count("SELECT count(*) FROM webhook_deliveries WHERE error IS NOT NULL OR status_code NOT BETWEEN 200 AND 299"); n != 0 {
		t.Fatalf("%d failures recorded for a shutdown", n)
	}
	if n := ts.count("SELECT consecutive_failures + (paused_at IS NOT NULL)::int FROM webhook_endpoints"); n != 0 {
		t.Fatalf("endpoint failures or paused: %d", n)
	}
	rows, _ := ts.db.Query(context.Background(), "SELECT id, state, attempt, errors::text FROM river_job WHERE kind = 'webhook_deliver'")
	for rows.Next() {
		var id int64
		var st string
		var a int
		var e *string
		_ = rows.Scan(&id, &st, &a, &e)
		t.Logf("%d %s %d %v", id, st, a, e)
	}
	if n := ts.count("SELECT count(*) FROM river_job WHERE kind = 'webhook_deliver' AND (errors IS NOT NULL OR state = 'retryable' OR attempt > 1)"); n != 0 {
		t.Fatalf("%d delivery jobs errored: the shutdown cost a retry", n)
	}
}
