package faults

import (
	"fmt"
	"testing"
	"time"

	"inventory/jobs"
	"inventory/pgtest"
	"inventory/testkit"
)

// TestWebhookKilledMidDelivery: the only instance is killed with SIGKILL
// while a webhook delivery is in flight, so its River job stays "running"
// with nobody to finish it. A new instance starts; River rescues the job
// after jobs.RescueStuckJobsAfter and delivery resumes from the event that
// was cut off, with the same webhook-id: every event, including those made
// after the restart, reaches the receiver in seq order, none lost.
func TestWebhookKilledMidDelivery(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pgtest.NewDatabase(t))
	allow := map[string]string{"INVENTORY_WEBHOOK_ALLOW_PRIVATE": "true"}
	a := h.start("A", allow)
	h.createKeys()
	rcv := testkit.NewWebhookReceiver(t)
	h.mutate(a.url, `mutation($u: String!) { createWebhook(input: {url: $u, topics: [STOCK_CHANGED], skus: ["WH-KILL"]}) { userErrors { code } } }`,
		map[string]any{"u": rcv.URL}, "createWebhook")
	held := rcv.HoldNext()
	h.loadCatalog(a.url, stock{locations: []string{"AMS"}, quantity: map[string]map[string]int{"WH-KILL": {"AMS": 10}}})
	receive := func(url, ref string) {
		h.mutate(url, `mutation($r: String!) { receiveStock(input: {sku: "WH-KILL", location: "AMS", quantity: 1, reference: $r}) { userErrors { code } } }`,
			map[string]any{"r": ref}, "receiveStock")
	}
	for i := range 5 {
		receive(a.url, fmt.Sprint("before-", i))
	}
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery arrived")
	}
	a.kill9()
	h.report("injected: SIGKILL of the only instance while the receiver held the first delivery of WH-KILL")

	b := h.start("B", allow)
	rcv.Release()
	for i := range 5 {
		receive(b.url, fmt.Sprint("after-", i))
	}
	var want []int64
	var problem string
	took, ok := waitFor(jobs.RescueStuckJobsAfter+90*time.Second, func() bool {
		want = testkit.PublishedSeqs(t, h.db, "WH-KILL")
		problem = testkit.WebhookOrderProblem(rcv.Requests(), want)
		return len(want) == 11 && problem == ""
	})
	if !ok {
		t.Fatalf("after %v: %s (%d events published)", took, problem, len(want))
	}
	reqs := rcv.Requests()
	if reqs[0].Status != 0 || reqs[1].ID != reqs[0].ID {
		t.Fatalf("the first request was not cut off and redelivered under its webhook-id: %+v", reqs[:2])
	}
	h.report("verified: all %d events of WH-KILL delivered in seq order %v, %v after the restart; the cut-off %s redelivered with the same webhook-id; %d requests in all",
		len(want), want, took.Round(time.Second), reqs[0].ID, len(reqs))
}
