package e2e

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"inventory/testkit"
	"inventory/webhooks"
)

// TestWaitlistOfferedOverHTTP: on the real binary, an endpoint created with
// topics [WAITLIST_OFFERED] gets one signed waitlist.offered delivery when a
// release hands the freed unit to the entry waiting (its entry, checkout,
// reservation, SKU, location and quantity), and none for the plain reserve
// that sold the SKU out; /metrics counts the offer and its wait.
func TestWaitlistOfferedOverHTTP(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_WEBHOOK_ALLOW_PRIVATE": "true"})
	rcv := testkit.NewWebhookReceiver(t)
	var p webhookPayloadJSON
	ts.mustData(ts.gql(ts.admin, `mutation($u: String!) { createWebhook(input: {url: $u, topics: [WAITLIST_OFFERED]}) { secret webhook { id topics } userErrors { code } } }`,
		map[string]any{"u": rcv.URL}), "createWebhook", &p)
	if p.Webhook == nil || p.Secret == nil || len(p.Webhook.Topics) != 1 || p.Webhook.Topics[0] != "WAITLIST_OFFERED" {
		t.Fatalf("create: %+v", p)
	}
	hold := ts.soldOutHTTP("WL-HOOK", 1)
	entry := mustJoinAs(t, ts.url, ts.service, joinVars("cart-wait", "k", "WL-HOOK", 1))
	var rel struct{ UserErrors []struct{ Code string } }
	ts.mustData(ts.gql(ts.service, `mutation($id: ID!) { releaseReservation(input: {id: $id}) { userErrors { code } } }`, map[string]any{"id": hold}), "releaseReservation", &rel)
	if len(rel.UserErrors) != 0 {
		t.Fatalf("release: %+v", rel)
	}
	var offered struct {
		Status      string
		Reservation *struct{ ID string }
	}
	ts.mustData(ts.gql(ts.service, `query($id: ID!) { waitlistEntry(id: $id) { status reservation { id } } }`, map[string]any{"id": entry.ID}), "waitlistEntry", &offered)
	if offered.Status != "OFFERED" || offered.Reservation == nil {
		t.Fatalf("entry after the release: %+v", offered)
	}

	waitUntil(t, 20*time.Second, "the waitlist.offered delivery", func() bool { return len(rcv.Requests()) > 0 })
	time.Sleep(500 * time.Millisecond) // room for a wrong second delivery
	reqs := rcv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d deliveries, want 1: %+v", len(reqs), reqs)
	}
	r := reqs[0]
	if err := webhooks.Verify(*p.Secret, r.ID, r.Timestamp, r.Body, r.Signature, time.Now(), webhooks.DefaultTolerance); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Type string
		Data struct {
			Seq                                               int64
			EntryID, CheckoutID, ReservationID, SKU, Location string
			Quantity                                          int
		}
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	d := body.Data
	if body.Type != "waitlist.offered" || r.ID != "evt_"+itoa64(d.Seq)+".waitlist.offered" || d.EntryID != entry.ID || d.CheckoutID != "cart-wait" ||
		d.ReservationID != offered.Reservation.ID || d.SKU != "WL-HOOK" || d.Location != "AMS" || d.Quantity != 1 {
		t.Fatalf("delivery %s: %s", r.ID, r.Body)
	}

	_, metrics := httpGetAs(t, ts.url+"/metrics", ts.admin)
	for _, want := range []string{`(?m)^inventory_waitlist_offers_total 1$`, `(?m)^inventory_waitlist_offer_wait_seconds_count 1$`,
		`(?m)^inventory_waitlist_waiting 0$`, `(?m)^inventory_waitlist_offers_expired_total 0$`} {
		if !regexp.MustCompile(want).MatchString(metrics) {
			t.Errorf("/metrics has no %s", want)
		}
	}
}
