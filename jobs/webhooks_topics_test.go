package jobs_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"inventory/domain"
	"inventory/testkit"
	"inventory/webhooks"
)

// topicBody is the union of the data every topic sends.
type topicBody struct {
	Type string `json:"type"`
	Data struct {
		Seq               int64  `json:"seq"`
		SKU               string `json:"sku"`
		Cause             string `json:"cause"`
		Available         int    `json:"available"`
		PreviousAvailable *int   `json:"previousAvailable"`
		Threshold         *int   `json:"threshold"`
		ReservationID     string `json:"reservationId"`
		Lines             []struct {
			SKU       string `json:"sku"`
			Available int    `json:"available"`
		} `json:"lines"`
	} `json:"data"`
}

// One endpoint per topic over a scripted run of stock changes: each gets
// exactly the deliveries of its topic, in seq order, signed, with
// reservation topics once per reservation (not per line).
func TestWebhookTopicsFireOnlyForTheirChange(t *testing.T) {
	b := setup(t)
	b.Store.WebhookAllowPrivate = true
	b.Catalog(t, domain.KindQuantity, []string{"A", "B", "P"}, "L1")

	type endpoint struct {
		topic  domain.WebhookTopic
		skus   []string
		rcv    *testkit.WebhookReceiver
		secret string
	}
	eps := []*endpoint{
		{topic: domain.TopicStockChanged},
		{topic: domain.TopicStockLow, skus: []string{"A", "B"}},
		{topic: domain.TopicStockOut, skus: []string{"A", "B"}},
		{topic: domain.TopicStockBackIn, skus: []string{"A", "B"}},
		{topic: domain.TopicReservationExpired},
		{topic: domain.TopicReservationConfirmed},
		{topic: domain.TopicPreorderAllocated},
	}
	for _, ep := range eps {
		ep.rcv = testkit.NewWebhookReceiver(t)
		created, err := b.Store.WebhookCreate(b.Ctx, domain.CreateWebhookInput{URL: ep.rcv.URL, Topics: []domain.WebhookTopic{ep.topic}, SKUs: ep.skus})
		if err != nil {
			t.Fatal(err)
		}
		if created.Webhook.LowStockThreshold != domain.DefaultLowStockThreshold {
			t.Fatalf("threshold %d", created.Webhook.LowStockThreshold)
		}
		ep.secret = created.Secret
	}

	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	l1 := "L1"
	receive := func(sku string, q int, ref string) {
		_, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: sku, Location: "L1", Quantity: q, Reference: ref})
		must("receive "+ref, err)
	}
	basket := func(key string, ttl int, lines map[string]int) domain.Reservation {
		var in []domain.ReserveLine
		for _, sku := range []string{"A", "B", "P"} {
			if q := lines[sku]; q > 0 {
				in = append(in, domain.ReserveLine{SKU: sku, Location: &l1, Quantity: q})
			}
		}
		res, _, err := b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: "cart-" + key, RequestKey: key, TTLSeconds: ttl, Lines: in})
		must("reserve "+key, err)
		return res
	}

	receive("A", 10, "r1")                                  // A 0→10: back_in
	receive("B", 3, "r2")                                   // B 0→3: back_in
	r1 := basket("r1", 600, map[string]int{"A": 6, "B": 3}) // A 10→4: low; B 3→0: out
	_, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: r1.ID, Reason: domain.ReasonOther})
	must("release", err) // A 4→10; B 0→3: back_in
	_, err = b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "A", Location: "L1", Delta: -4, Reason: "count", Reference: "c1"})
	must("adjust", err)                                     // A 10→6
	r2 := basket("r2", 600, map[string]int{"A": 6, "B": 1}) // A 6→0: low, out; B 3→2
	_, err = b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: r2.ID, OrderRef: "ORD-2"})
	must("confirm", err)                                  // confirmed once, two lines
	receive("A", 2, "r3")                                 // A 0→2: back_in
	r3 := basket("r3", 1, map[string]int{"A": 2, "B": 2}) // A 2→0, B 2→0: out, out
	time.Sleep(1500 * time.Millisecond)
	n, err := b.Store.ReservationExpireDue(b.Ctx, 100)
	must("expire", err) // A 0→2, B 0→2: back_in, back_in; expired once
	if n != 1 {
		t.Fatalf("expired %d reservations", n)
	}
	_, err = b.Store.PreorderSet(b.Ctx, domain.SetPreorderInput{SKU: "P", Location: "L1", PendingSupply: 2})
	must("set pre-order", err)
	r4 := basket("r4", 600, map[string]int{"P": 2})
	_, err = b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: r4.ID, OrderRef: "ORD-4"})
	must("confirm pre-order", err)
	receive("P", 2, "r4") // allocated to the pre-order

	if _, err := b.Store.StockEventsPublish(b.Ctx, 1000); err != nil {
		t.Fatal(err)
	}
	events := b.Published(t, 0)
	head := events[len(events)-1].Seq
	bySeq := map[int64]domain.StockEvent{}
	var all []string
	for _, e := range events {
		bySeq[e.Seq] = e
		all = append(all, fmt.Sprintf("%s %s %d", e.SKU, e.Cause, e.Available()))
	}
	t.Logf("events: %q", all)

	cfg := b.config()
	cfg.Webhooks, cfg.WebhookAllowPrivate = b.Store, true
	b.startClient(t, cfg)
	deadline := time.Now().Add(20 * time.Second)
	for {
		list, err := b.Store.WebhookList(b.Ctx)
		must("list", err)
		done := true
		for _, w := range list {
			done = done && w.CursorSeq == head
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cursors %+v after 20s, head %d", list, head)
		}
		time.Sleep(50 * time.Millisecond)
	}

	want := map[domain.WebhookTopic][]string{
		domain.TopicStockLow:             {"A RESERVED 4", "A RESERVED 0"},
		domain.TopicStockOut:             {"B RESERVED 0", "A RESERVED 0", "A RESERVED 0", "B RESERVED 0"},
		domain.TopicStockBackIn:          {"A RECEIVED 10", "B RECEIVED 3", "B RELEASED 3", "A RECEIVED 2", "A EXPIRED 2", "B EXPIRED 2"},
		domain.TopicReservationExpired:   {r3.ID + " A 2,B 2"},
		domain.TopicReservationConfirmed: {r2.ID + " A 0,B 2", r4.ID + " P 0"},
	}
	for _, ep := range eps {
		var got []string
		var last int64
		for i, r := range ep.rcv.Requests() {
			if err := webhooks.Verify(ep.secret, r.ID, r.Timestamp, r.Body, r.Signature, time.Now(), webhooks.DefaultTolerance); err != nil {
				t.Fatalf("%s request %d: %v", ep.topic, i, err)
			}
			var body topicBody
			must("decode", json.Unmarshal(r.Body, &body))
			if body.Type != ep.topic.Name() || r.ID != domain.WebhookMessageID(body.Data.Seq, ep.topic) || body.Data.Seq <= last {
				t.Fatalf("%s request %d: id %s after seq %d: %s", ep.topic, i, r.ID, last, r.Body)
			}
			last = body.Data.Seq
			e := bySeq[body.Data.Seq]
			switch ep.topic {
			case domain.TopicReservationExpired, domain.TopicReservationConfirmed:
				var lines []string
				for _, l := range body.Data.Lines {
					lines = append(lines, fmt.Sprintf("%s %d", l.SKU, l.Available))
				}
				got = append(got, body.Data.ReservationID+" "+strings.Join(lines, ","))
			default:
				got = append(got, fmt.Sprintf("%s %s %d", e.SKU, e.Cause, e.Available()))
				if body.Data.SKU != e.SKU || body.Data.Available != e.Available() {
					t.Fatalf("%s request %d: %s for event %+v", ep.topic, i, r.Body, e)
				}
			}
			if ep.topic == domain.TopicStockLow && (body.Data.Threshold == nil || *body.Data.Threshold != 5 || *body.Data.PreviousAvailable <= 5) {
				t.Fatalf("stock.low %s", r.Body)
			}
		}
		switch ep.topic {
		case domain.TopicStockChanged:
			if len(got) != len(events) {
				t.Fatalf("stock.changed: %d deliveries for %d events", len(got), len(events))
			}
		case domain.TopicPreorderAllocated:
			var wantAlloc []string
			for _, e := range events {
				if e.Cause == domain.CausePreorderAllocated {
					wantAlloc = append(wantAlloc, fmt.Sprintf("%s %s %d", e.SKU, e.Cause, e.Available()))
				}
			}
			if len(wantAlloc) == 0 || !slices.Equal(got, wantAlloc) {
				t.Fatalf("preorder.allocated: got %q, want %q", got, wantAlloc)
			}
		default:
			if !slices.Equal(got, want[ep.topic]) {
				t.Errorf("%s: got %q, want %q", ep.topic, got, want[ep.topic])
			}
		}
	}
}

// stock.low uses a SKU's own threshold where it has one and the endpoint's
// elsewhere; clearing a SKU's threshold returns it to the endpoint's.
func TestWebhookStockLowPerSKUThreshold(t *testing.T) {
	b := setup(t)
	b.Store.WebhookAllowPrivate = true
	b.Catalog(t, domain.KindQuantity, []string{"A", "B", "C", "D"}, "L1")
	two, zero := 2, 0
	for sku, th := range map[string]*int{"A": &two, "C": &zero, "D": &two} {
		sku, err := b.Store.SKULowStockThresholdSet(b.Ctx, sku, th)
		if err != nil || sku.LowStockThreshold == nil || *sku.LowStockThreshold != *th {
			t.Fatalf("set %v: %+v %v", *th, sku, err)
		}
	}
	if sku, err := b.Store.SKULowStockThresholdSet(b.Ctx, "D", nil); err != nil || sku.LowStockThreshold != nil {
		t.Fatalf("clear D: %+v %v", sku, err)
	}
	rcv := testkit.NewWebhookReceiver(t)
	if _, err := b.Store.WebhookCreate(b.Ctx, domain.CreateWebhookInput{URL: rcv.URL, Topics: []domain.WebhookTopic{domain.TopicStockLow}}); err != nil {
		t.Fatal(err)
	}
	step := 0
	change := func(sku string, delta int) {
		t.Helper()
		step++
		var err error
		if delta > 0 {
			_, err = b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: sku, Location: "L1", Quantity: delta, Reference: fmt.Sprint("r", step)})
		} else {
			_, err = b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: sku, Location: "L1", Delta: delta, Reason: "count", Reference: fmt.Sprint("a", step)})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, sku := range []string{"A", "B", "C", "D"} {
		change(sku, 10)
	}
	change("A", -6) // 10→4: above A's 2, no stock.low
	change("A", -2) // 4→2: stock.low at 2
	change("B", -6) // 10→4: stock.low at the endpoint's 5
	change("C", -9) // 10→1: above C's 0
	change("C", -1) // 1→0: stock.low at 0
	change("D", -6) // 10→4: D's own was cleared, the endpoint's 5
	if _, err := b.Store.StockEventsPublish(b.Ctx, 1000); err != nil {
		t.Fatal(err)
	}

	cfg := b.config()
	cfg.Webhooks, cfg.WebhookAllowPrivate = b.Store, true
	b.startClient(t, cfg)
	want := []string{"A 2 2", "B 4 5", "C 0 0", "D 4 5"}
	var got []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		got = nil
		for _, r := range rcv.Requests() {
			var body topicBody
			if err := json.Unmarshal(r.Body, &body); err != nil || body.Data.Threshold == nil {
				t.Fatalf("%s: %v", r.Body, err)
			}
			got = append(got, fmt.Sprintf("%s %d %d", body.Data.SKU, body.Data.Available, *body.Data.Threshold))
		}
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("stock.low deliveries %q, want %q", got, want)
	}
}
