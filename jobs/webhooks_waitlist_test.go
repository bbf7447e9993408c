package jobs_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"inventory/domain"
	"inventory/testkit"
	"inventory/webhooks"
)

// waitlistOfferedBody is a waitlist.offered delivery.
type waitlistOfferedBody struct {
	Type string `json:"type"`
	Data struct {
		Seq           int64  `json:"seq"`
		EntryID       string `json:"entryId"`
		CheckoutID    string `json:"checkoutId"`
		ReservationID string `json:"reservationId"`
		SKU           string `json:"sku"`
		Location      string `json:"location"`
		Quantity      int    `json:"quantity"`
	} `json:"data"`
}

// A release that frees two units offers them first-fit (the first and third
// entries; the second needs two and keeps its place): the waitlist.offered
// endpoint gets one signed delivery per offer, naming the entry, its
// checkout, the balance, the quantity and the HELD reservation it was
// handed, and nothing for the plain reserves of the run (on the waitlisted
// SKU before anyone waited, and on another SKU after the offers, whose
// request key starts with waitlist: as a client's could before that prefix
// was reserved). An endpoint filtered to the other SKU gets no offer.
func TestWebhookWaitlistOfferedPerOffer(t *testing.T) {
	b := setup(t)
	b.Store.WebhookAllowPrivate = true
	b.Catalog(t, domain.KindQuantity, []string{"W", "X"}, "L1")
	rcv, other := testkit.NewWebhookReceiver(t), testkit.NewWebhookReceiver(t)
	created, err := b.Store.WebhookCreate(b.Ctx, domain.CreateWebhookInput{URL: rcv.URL, Topics: []domain.WebhookTopic{domain.TopicWaitlistOffered}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.WebhookCreate(b.Ctx, domain.CreateWebhookInput{URL: other.URL, Topics: []domain.WebhookTopic{domain.TopicWaitlistOffered}, SKUs: []string{"X"}}); err != nil {
		t.Fatal(err)
	}
	for _, sku := range []string{"W", "X"} {
		if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: sku, Location: "L1", Quantity: 2, Reference: "r-" + sku}); err != nil {
			t.Fatal(err)
		}
	}
	held := b.reserve(t, "plain-w", "W", "L1", 2, 600) // sold out: the line forms
	entries := map[string]domain.WaitlistEntry{}
	for i, q := range []int{1, 2, 1} {
		e, _, err := b.Store.WaitlistJoin(b.Ctx, domain.JoinWaitlistInput{CheckoutID: fmt.Sprint("wait-", i), RequestKey: "k", SKU: "W", Quantity: q, TTLSeconds: 600})
		if err != nil {
			t.Fatalf("join %d: %v", i, err)
		}
		entries[e.ID] = e
	}
	if _, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: held.ID, Reason: domain.ReasonOther}); err != nil {
		t.Fatal(err)
	}
	// A hold made before the waitlist: prefix was reserved for offers (a
	// client's own key) is no offer, and does not stop delivery.
	legacy := b.reserve(t, "plain-x", "X", "L1", 1, 600)
	if _, err := b.Pool.Exec(b.Ctx, `UPDATE reservations SET request_key = 'waitlist:cart-key-1' WHERE id = $1`, legacy.ID); err != nil {
		t.Fatal(err)
	}
	var want []string
	for id, e := range entries {
		got, err := b.Store.WaitlistEntryGet(b.Ctx, domain.Scope{}, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == domain.WaitlistOffered {
			want = append(want, fmt.Sprintf("%s %s %s W L1 %d", id, e.CheckoutID, *got.ReservationID, e.Quantity))
		}
	}
	slices.Sort(want)
	if len(want) != 2 {
		t.Fatalf("offers %q, want 2", want)
	}
	if _, err := b.Store.StockEventsPublish(b.Ctx, 1000); err != nil {
		t.Fatal(err)
	}
	events := b.Published(t, 0)
	head := events[len(events)-1].Seq
	bySeq := map[int64]domain.StockEvent{}
	for _, e := range events {
		bySeq[e.Seq] = e
	}

	cfg := b.config()
	cfg.Webhooks, cfg.WebhookAllowPrivate = b.Store, true
	b.startClient(t, cfg)
	b.waitWebhookCursors(t, head)
	var got []string
	for i, r := range rcv.Requests() {
		if err := webhooks.Verify(created.Secret, r.ID, r.Timestamp, r.Body, r.Signature, time.Now(), webhooks.DefaultTolerance); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		var body waitlistOfferedBody
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		d := body.Data
		e := bySeq[d.Seq]
		if body.Type != "waitlist.offered" || r.ID != domain.WebhookMessageID(d.Seq, domain.TopicWaitlistOffered) ||
			e.Cause != domain.CauseReserved || e.ReservationID == nil || *e.ReservationID != d.ReservationID {
			t.Fatalf("request %d: id %s, %s for event %+v", i, r.ID, r.Body, e)
		}
		got = append(got, fmt.Sprintf("%s %s %s %s %s %d", d.EntryID, d.CheckoutID, d.ReservationID, d.SKU, d.Location, d.Quantity))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("waitlist.offered deliveries %q, want %q", got, want)
	}
	if n := len(other.Requests()); n != 0 {
		t.Fatalf("the endpoint for X got %d deliveries", n)
	}
}

// An entry without a location for 3 units is offered 2 at the location
// first in sourcing order and 1 at the second (two RESERVED events, one per
// balance): the waitlist.offered endpoint gets one delivery for the offer,
// at its first event, with both lines; an endpoint filtered to the second
// location gets one too, at the event it sees, with the same lines.
func TestWebhookWaitlistOfferedOncePerSplitOffer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Store.WebhookAllowPrivate = true
	for i, loc := range []string{"FIRST", "SECOND"} {
		if _, err := b.Store.LocationCreate(b.Ctx, domain.CreateLocationInput{Code: loc, Name: loc, Priority: i + 1}); err != nil {
			t.Fatal(err)
		}
	}
	b.Catalog(t, domain.KindQuantity, []string{"S"})
	rcv, second := testkit.NewWebhookReceiver(t), testkit.NewWebhookReceiver(t)
	created, err := b.Store.WebhookCreate(b.Ctx, domain.CreateWebhookInput{URL: rcv.URL, Topics: []domain.WebhookTopic{domain.TopicWaitlistOffered}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.WebhookCreate(b.Ctx, domain.CreateWebhookInput{URL: second.URL, Topics: []domain.WebhookTopic{domain.TopicWaitlistOffered}, Locations: []string{"SECOND"}}); err != nil {
		t.Fatal(err)
	}
	var holds []domain.Reservation
	for _, loc := range []string{"FIRST", "SECOND"} {
		if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "S", Location: loc, Quantity: 2, Reference: "r-" + loc}); err != nil {
			t.Fatal(err)
		}
		holds = append(holds, b.reserve(t, "all-"+loc, "S", loc, 2, 600))
	}
	e, _, err := b.Store.WaitlistJoin(b.Ctx, domain.JoinWaitlistInput{CheckoutID: "wait", RequestKey: "k", SKU: "S", Quantity: 3, TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range holds {
		if _, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: h.ID, Reason: domain.ReasonOther}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.Store.WaitlistEntryGet(b.Ctx, domain.Scope{}, e.ID)
	if err != nil || got.Status != domain.WaitlistOffered {
		t.Fatalf("entry: %+v %v", got, err)
	}
	if _, err := b.Store.StockEventsPublish(b.Ctx, 1000); err != nil {
		t.Fatal(err)
	}
	events := b.Published(t, 0)
	head := events[len(events)-1].Seq
	var offerEvents []int64
	for _, ev := range events {
		if ev.Cause == domain.CauseReserved && ev.ReservationID != nil && *ev.ReservationID == *got.ReservationID {
			offerEvents = append(offerEvents, ev.Seq)
		}
	}
	if len(offerEvents) != 2 {
		t.Fatalf("the offer has %d RESERVED events, want one per location", len(offerEvents))
	}

	cfg := b.config()
	cfg.Webhooks, cfg.WebhookAllowPrivate = b.Store, true
	b.startClient(t, cfg)
	b.waitWebhookCursors(t, head)
	type line struct {
		Location string
		Quantity int
	}
	wantLines := []line{{"FIRST", 2}, {"SECOND", 1}}
	for _, c := range []struct {
		name string
		rcv  *testkit.WebhookReceiver
		seq  int64
		loc  string
	}{{"unfiltered", rcv, offerEvents[0], "FIRST"}, {"SECOND only", second, offerEvents[1], "SECOND"}} {
		reqs := c.rcv.Requests()
		if len(reqs) != 1 {
			t.Fatalf("%s endpoint: %d deliveries for one offer, want 1", c.name, len(reqs))
		}
		var body struct {
			Type string
			Data struct {
				Seq                              int64
				EntryID, ReservationID, Location string
				Quantity                         int
				Lines                            []line
			}
		}
		if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
			t.Fatal(err)
		}
		d := body.Data
		if body.Type != "waitlist.offered" || d.Seq != c.seq || d.EntryID != e.ID || d.ReservationID != *got.ReservationID ||
			d.Location != c.loc || d.Quantity != 3 || !slices.Equal(d.Lines, wantLines) {
			t.Fatalf("%s endpoint: %s", c.name, reqs[0].Body)
		}
	}
	if err := webhooks.Verify(created.Secret, rcv.Requests()[0].ID, rcv.Requests()[0].Timestamp, rcv.Requests()[0].Body, rcv.Requests()[0].Signature, time.Now(), webhooks.DefaultTolerance); err != nil {
		t.Fatal(err)
	}
}
