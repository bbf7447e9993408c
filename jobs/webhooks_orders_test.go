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

// orderActionBody is an order.fulfilled or order.cancelled delivery.
type orderActionBody struct {
	Type string `json:"type"`
	Data struct {
		Seq       int64   `json:"seq"`
		OrderRef  string  `json:"orderRef"`
		Reference string  `json:"reference"`
		Reason    *string `json:"reason"`
		Lines     []struct {
			SKU      string `json:"sku"`
			Location string `json:"location"`
			Quantity int    `json:"quantity"`
		} `json:"lines"`
	} `json:"data"`
}

func (b orderActionBody) String() string {
	s := fmt.Sprintf("%s %s %s", b.Type, b.Data.OrderRef, b.Data.Reference)
	if b.Data.Reason != nil {
		s += " (" + *b.Data.Reason + ")"
	}
	for _, l := range b.Data.Lines {
		s += fmt.Sprintf(" %s@%s×%d", l.SKU, l.Location, l.Quantity)
	}
	return s
}

// Each fulfillOrder and cancelOrder is one signed delivery, at the first of
// its events the endpoint's filters pass, with all the lines it moved: a
// partial shipment, the rest of the order (two balances, one delivery), a
// replay of it (nothing), and a cancel with its reason. An endpoint
// filtered to SKU B gets the one action that touched B, with both lines.
func TestWebhookOrderActionsOncePerAction(t *testing.T) {
	b := setup(t)
	b.Store.WebhookAllowPrivate = true
	b.Catalog(t, domain.KindQuantity, []string{"A", "B"})
	if _, err := b.Store.LocationCreate(b.Ctx, domain.CreateLocationInput{Code: "WH", Name: "Warehouse", Fulfillment: domain.FulfillOnShipment}); err != nil {
		t.Fatal(err)
	}
	rcv, onlyB := testkit.NewWebhookReceiver(t), testkit.NewWebhookReceiver(t)
	topics := []domain.WebhookTopic{domain.TopicOrderFulfilled, domain.TopicOrderCancelled}
	created, err := b.Store.WebhookCreate(b.Ctx, domain.CreateWebhookInput{URL: rcv.URL, Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.WebhookCreate(b.Ctx, domain.CreateWebhookInput{URL: onlyB.URL, Topics: topics, SKUs: []string{"B"}}); err != nil {
		t.Fatal(err)
	}
	for _, sku := range []string{"A", "B"} {
		if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: sku, Location: "WH", Quantity: 5, Reference: "r-" + sku}); err != nil {
			t.Fatal(err)
		}
	}
	order := func(ref string, lines ...domain.ReserveLine) {
		t.Helper()
		res, _, err := b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: "c-" + ref, RequestKey: "k", TTLSeconds: 600, Lines: lines})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: res.ID, OrderRef: ref}); err != nil {
			t.Fatal(err)
		}
	}
	wh := "WH"
	order("ORD-1", domain.ReserveLine{SKU: "A", Location: &wh, Quantity: 2}, domain.ReserveLine{SKU: "B", Location: &wh, Quantity: 1})
	order("ORD-2", domain.ReserveLine{SKU: "A", Location: &wh, Quantity: 1})
	steps := []struct {
		cancel bool
		in     domain.OrderChangeInput
	}{
		{false, domain.OrderChangeInput{OrderRef: "ORD-1", Reference: "parcel-1", Lines: []domain.OrderQuantity{{SKU: "A", Location: "WH", Quantity: 1}}}},
		{false, domain.OrderChangeInput{OrderRef: "ORD-1", Reference: "parcel-2"}},
		{false, domain.OrderChangeInput{OrderRef: "ORD-1", Reference: "parcel-2"}}, // a retry: replayed
		{true, domain.OrderChangeInput{OrderRef: "ORD-2", Reference: "cancel-1", Reason: "customer_request"}},
	}
	for i, s := range steps {
		call := b.Store.OrderFulfill
		if s.cancel {
			call = b.Store.OrderCancel
		}
		c, err := call(b.Ctx, s.in)
		if err != nil || c.Replayed != (i == 2) {
			t.Fatalf("step %d: %+v %v", i, c, err)
		}
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
	read := func(r *testkit.WebhookReceiver, secret string) []string {
		t.Helper()
		var got []string
		for i, req := range r.Requests() {
			if secret != "" {
				if err := webhooks.Verify(secret, req.ID, req.Timestamp, req.Body, req.Signature, time.Now(), webhooks.DefaultTolerance); err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
			}
			var body orderActionBody
			if err := json.Unmarshal(req.Body, &body); err != nil {
				t.Fatal(err)
			}
			e := bySeq[body.Data.Seq]
			topic := map[string]domain.WebhookTopic{"order.fulfilled": domain.TopicOrderFulfilled, "order.cancelled": domain.TopicOrderCancelled}[body.Type]
			wantCause := map[domain.WebhookTopic]domain.StockEventCause{domain.TopicOrderFulfilled: domain.CauseFulfilled, domain.TopicOrderCancelled: domain.CauseCancelled}[topic]
			if topic == "" || req.ID != domain.WebhookMessageID(body.Data.Seq, topic) || e.Cause != wantCause {
				t.Fatalf("request %d: id %s, %s for event %+v", i, req.ID, req.Body, e)
			}
			got = append(got, body.String())
		}
		slices.Sort(got)
		return got
	}
	want := []string{
		"order.cancelled ORD-2 cancel-1 (customer_request) A@WH×1",
		"order.fulfilled ORD-1 parcel-1 A@WH×1",
		"order.fulfilled ORD-1 parcel-2 A@WH×1 B@WH×1",
	}
	if got := read(rcv, created.Secret); !slices.Equal(got, want) {
		t.Fatalf("deliveries\n%q\nwant\n%q", got, want)
	}
	if got := read(onlyB, ""); !slices.Equal(got, want[2:]) {
		t.Fatalf("the endpoint for B got\n%q\nwant\n%q", got, want[2:])
	}
}
