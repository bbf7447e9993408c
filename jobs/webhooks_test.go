package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"inventory/domain"
	"inventory/jobs"
	"inventory/testkit"
	"inventory/webhooks"
)

type deliveryBody struct {
	Type string `json:"type"`
	Data struct {
		Seq       int64  `json:"seq"`
		SKU       string `json:"sku"`
		Location  string `json:"location"`
		Cause     string `json:"cause"`
		OnHand    int    `json:"onHand"`
		Available int    `json:"available"`
		// PreviousSeq chains a balance's deliveries.
		PreviousSeq *int64 `json:"previousSeq"`
	} `json:"data"`
}

// A receiver that fails three times then recovers gets every selected event,
// in seq order, each signed, with retries only under the same webhook-id;
// events of other SKUs are skipped and the cursor reaches the head.
func TestWebhookDeliveryInOrderThroughFailures(t *testing.T) {
	b := setup(t)
	b.Store.WebhookAllowPrivate = true
	b.Catalog(t, domain.KindQuantity, []string{"A", "B"}, "L1")
	rcv := testkit.NewWebhookReceiver(t)
	rcv.FailNext(3, http.StatusServiceUnavailable)

	created, err := b.Store.WebhookCreate(b.Ctx, domain.CreateWebhookInput{URL: rcv.URL, Topics: []domain.WebhookTopic{domain.TopicStockChanged}, SKUs: []string{"A"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		sku := []string{"A", "B", "A"}[i%3]
		if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: sku, Location: "L1", Quantity: i + 1, Reference: fmt.Sprint("r", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Store.StockEventsPublish(b.Ctx, 1000); err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, e := range b.Published(t, 0) {
		if e.SKU == "A" {
			want = append(want, e.Seq)
		}
	}

	cfg := b.config()
	cfg.Webhooks, cfg.WebhookAllowPrivate = b.Store, true
	cfg.WebhookBackoff = func(int) time.Duration { return 50 * time.Millisecond }
	b.startClient(t, cfg)

	deadline := time.Now().Add(20 * time.Second)
	for {
		list, err := b.Store.WebhookList(b.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		if list[0].CursorSeq == 12 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cursor %d after 20s; received %d requests", list[0].CursorSeq, len(rcv.Requests()))
		}
		time.Sleep(50 * time.Millisecond)
	}

	got := rcv.Requests()
	var delivered []int64
	var last int64
	for i, r := range got {
		if err := webhooks.Verify(created.Secret, r.ID, r.Timestamp, r.Body, r.Signature, time.Now(), webhooks.DefaultTolerance); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		var body deliveryBody
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		if body.Type != "stock.changed" || body.Data.SKU != "A" || body.Data.Location != "L1" || body.Data.Cause != "RECEIVED" || body.Data.Available != body.Data.OnHand {
			t.Fatalf("request %d: body %s", i, r.Body)
		}
		if r.ID != domain.WebhookEventID(body.Data.Seq) {
			t.Fatalf("request %d: webhook-id %s for seq %d", i, r.ID, body.Data.Seq)
		}
		if body.Data.Seq < last {
			t.Fatalf("request %d: seq %d after %d", i, body.Data.Seq, last)
		}
		last = body.Data.Seq
		if r.Delivered() {
			// Each answered delivery names the one before it of the same
			// balance (0 for its first), so the chain has no gap.
			prev := int64(0)
			if n := len(delivered); n > 0 {
				prev = delivered[n-1]
			}
			if body.Data.PreviousSeq == nil || *body.Data.PreviousSeq != prev {
				t.Fatalf("request %d: previousSeq %v, want %d: %s", i, body.Data.PreviousSeq, prev, r.Body)
			}
			delivered = append(delivered, body.Data.Seq)
		}
	}
	if fmt.Sprint(delivered) != fmt.Sprint(want) {
		t.Fatalf("delivered %v, want %v", delivered, want)
	}
	if len(got) != len(want)+3 || got[0].ID != got[3].ID {
		t.Fatalf("%d requests for %d events; first ids %v", len(got), len(want), got[:4])
	}

	log, err := b.Store.WebhookDeliveryList(b.Ctx, created.Webhook.ID, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != len(got) {
		t.Fatalf("%d log entries for %d requests", len(log), len(got))
	}
	first := log[len(log)-4:] // newest first: the first event's four attempts are last
	for i, d := range first {
		attempt := 4 - i
		wantStatus := 503
		if attempt == 4 {
			wantStatus = 204
		}
		if d.Attempt != attempt || d.StatusCode == nil || *d.StatusCode != wantStatus || d.WebhookID != domain.WebhookEventID(want[0]) ||
			(d.Error != nil) != (wantStatus == 503) {
			t.Fatalf("log entry %d: %+v", i, d)
		}
	}
}

// An endpoint that keeps failing is paused with the reason; resumed, it
// catches up from where it stopped.
func TestWebhookPausedAfterFailuresThenResumes(t *testing.T) {
	b := setup(t)
	b.Store.WebhookAllowPrivate = true
	b.Catalog(t, domain.KindQuantity, []string{"A"}, "L1")
	rcv := testkit.NewWebhookReceiver(t)
	rcv.FailNext(1000, http.StatusInternalServerError)
	created, err := b.Store.WebhookCreate(b.Ctx, domain.CreateWebhookInput{URL: rcv.URL, Topics: []domain.WebhookTopic{domain.TopicStockChanged}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "A", Location: "L1", Quantity: 1, Reference: fmt.Sprint("r", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Store.StockEventsPublish(b.Ctx, 1000); err != nil {
		t.Fatal(err)
	}
	cfg := b.config()
	cfg.Webhooks, cfg.WebhookAllowPrivate, cfg.WebhookPauseAfter = b.Store, true, 3
	cfg.WebhookBackoff = func(int) time.Duration { return 20 * time.Millisecond }
	b.startClient(t, cfg)

	waitFor := func(what string, ok func(domain.WebhookEndpoint) bool) domain.WebhookEndpoint {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			list, err := b.Store.WebhookList(b.Ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ok(list[0]) {
				return list[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: endpoint %+v", what, list[0])
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	w := waitFor("paused", domain.WebhookEndpoint.Paused)
	if w.PauseReason == nil || w.CursorSeq != 0 || w.ConsecutiveFailures != 3 {
		t.Fatalf("paused endpoint %+v", w)
	}
	t.Logf("pause reason: %s", *w.PauseReason)
	time.Sleep(300 * time.Millisecond)
	if n := len(rcv.Requests()); n != 3 {
		t.Fatalf("%d requests to a paused endpoint, want 3", n)
	}

	rcv.FailNext(0, 0)
	if _, err := b.Store.WebhookResume(b.Ctx, created.Webhook.ID); err != nil {
		t.Fatal(err)
	}
	waitFor("caught up", func(w domain.WebhookEndpoint) bool { return w.CursorSeq == 3 })
	var seqs []string
	for _, r := range rcv.Requests()[3:] {
		seqs = append(seqs, r.ID)
	}
	if fmt.Sprint(seqs) != "[evt_1 evt_2 evt_3]" {
		t.Fatalf("after resume: %v", seqs)
	}
}

// A quiet system writes nothing to River's tables for webhooks: with no
// endpoint, or one that is caught up, ticks insert no job; an event to send
// inserts delivery jobs only until it is delivered.
func TestWebhookDispatchIdleInsertsNoJobs(t *testing.T) {
	b := setup(t)
	b.Store.WebhookAllowPrivate = true
	b.Catalog(t, domain.KindQuantity, []string{"A"}, "L1")
	cfg := b.config()
	cfg.Webhooks, cfg.WebhookAllowPrivate = b.Store, true
	b.startClient(t, cfg)
	jobsSoFar := func() int {
		var n int
		if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM river_job WHERE kind LIKE 'webhook%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	time.Sleep(time.Second) // 10 ticks with no endpoint
	if n := jobsSoFar(); n != 0 {
		t.Fatalf("%d webhook jobs with no endpoint", n)
	}

	rcv := testkit.NewWebhookReceiver(t)
	if _, err := b.Store.WebhookCreate(b.Ctx, domain.CreateWebhookInput{URL: rcv.URL, Topics: []domain.WebhookTopic{domain.TopicStockChanged}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // 10 ticks with an endpoint that is caught up
	if n := jobsSoFar(); n != 0 {
		t.Fatalf("%d webhook jobs with nothing to send", n)
	}

	if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "A", Location: "L1", Quantity: 1, Reference: "r"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.StockEventsPublish(b.Ctx, 1000); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(rcv.Requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the event was not delivered")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the job records its end
	after := jobsSoFar()
	if after == 0 {
		t.Fatal("delivered without a River job")
	}
	time.Sleep(time.Second) // 10 more ticks, caught up again
	if n := jobsSoFar(); n != after {
		t.Fatalf("%d webhook jobs after catching up, %d when the event was delivered", n, after)
	}
}

// flakyDue is the real store whose WebhooksDue fails while down is set, as
// it does while the database is unreachable.
type flakyDue struct {
	jobs.WebhookStore
	down atomic.Bool
}

func (f *flakyDue) WebhooksDue(ctx context.Context) ([]string, error) {
	if f.down.Load() {
		return nil, errors.New("database unreachable")
	}
	return f.WebhookStore.WebhooksDue(ctx)
}

// A dispatcher whose ticks fail logs the streak once when it starts and once
// when it ends, and dispatches again afterwards.
func TestWebhookDispatcherLogsFailingStreakOnce(t *testing.T) {
	b := setup(t)
	client := b.startClient(t, b.config())
	store := &flakyDue{WebhookStore: b.Store}
	store.down.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	d := &jobs.WebhookDispatcher{Store: store, Client: client, Interval: 10 * time.Millisecond, Logger: b.logger}
	go func() { defer close(done); d.Run(ctx) }()
	defer func() { cancel(); <-done }()

	time.Sleep(200 * time.Millisecond) // about 20 failing ticks
	store.down.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for len(b.logs.lines("webhook dispatch recovered")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no recovery logged:\n%s", b.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(b.logs.lines("webhook dispatch failing", "database unreachable")); n != 1 {
		t.Fatalf("%d failing lines for one streak:\n%s", n, b.logs.String())
	}
	rec := b.logs.lines("webhook dispatch recovered")
	var ticks int
	if len(rec) != 1 {
		t.Fatalf("recovery lines %q", rec)
	}
	if _, err := fmt.Sscanf(rec[0][strings.Index(rec[0], "failed_ticks="):], "failed_ticks=%d", &ticks); err != nil || ticks < 5 {
		t.Fatalf("recovery line %q: %d failed ticks counted (%v)", rec[0], ticks, err)
	}
}
