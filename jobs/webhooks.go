package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"inventory/domain"
	"inventory/store"
	"inventory/webhooks"
)

// WebhookStore is what webhook delivery reads and records. store.Store is one.
type WebhookStore interface {
	WebhooksDue(ctx context.Context) ([]string, error)
	WebhookPending(ctx context.Context, id string, window int) (store.WebhookTarget, []store.WebhookEvent, int64, error)
	WebhookDelivered(ctx context.Context, id string, a store.WebhookAttempt, through int64) error
	WebhookAdvance(ctx context.Context, id string, through int64) error
	WebhookFailed(ctx context.Context, id string, a store.WebhookAttempt, pauseAfter int) (bool, error)
	WebhookPauseFor(ctx context.Context, id, reason string) error
}

// Webhook delivery defaults. River's default retry policy waits attempt⁴
// seconds with jitter, so 16 attempts span about two days.
const (
	WebhookMaxAttempts    = 16
	WebhookAttemptTimeout = 10 * time.Second
	webhookWindow         = 500              // stock event seqs read per pass
	webhookRunFor         = 30 * time.Second // keeps Timeout below RescueStuckJobsAfter
)

// WebhookDeliverArgs delivers one endpoint's pending events, in seq order.
type WebhookDeliverArgs struct {
	EndpointID string `json:"endpoint_id"`
}

// Kind names the job in River's tables.
func (WebhookDeliverArgs) Kind() string { return "webhook_deliver" }

// webhookUniqueStates: at most one job per endpoint is waiting, running or
// retrying, so one endpoint's events are never delivered concurrently (and
// so arrive in seq order).
var webhookUniqueStates = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
	rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled}

// InsertOpts: unique per endpoint, retried over about two days.
func (WebhookDeliverArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: WebhookMaxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: webhookUniqueStates}}
}

// WebhookDeliverWorker posts an endpoint's pending stock events one at a
// time, in seq order, and moves its cursor past each only after a 2xx answer.
// A failure is recorded and returned, so River retries the job with backoff
// from the same event (same webhook-id); after PauseAfter consecutive
// failures the endpoint is paused with the last error as the reason.
type WebhookDeliverWorker struct {
	river.WorkerDefaults[WebhookDeliverArgs]
	Store WebhookStore
	// AllowPrivate lets deliveries reach loopback and private addresses.
	AllowPrivate bool
	// Lookup, if set, resolves target names instead of the system resolver
	// (tests; see webhooks.DialContext).
	Lookup webhooks.Lookup
	// AttemptTimeout bounds one POST (WebhookAttemptTimeout when zero).
	AttemptTimeout time.Duration
	// PauseAfter consecutive failures pause the endpoint (WebhookMaxAttempts
	// when zero).
	PauseAfter int
	// Backoff, if set, replaces River's retry policy (tests).
	Backoff func(attempt int) time.Duration
	// OnAttempt, if set, is told each attempt's outcome (metrics).
	OnAttempt func(ok bool, latency time.Duration)
	Logger    *slog.Logger

	clientOnce sync.Once
	client     *http.Client
}

// Timeout leaves room for a pass of deliveries.
func (w *WebhookDeliverWorker) Timeout(*river.Job[WebhookDeliverArgs]) time.Duration {
	return webhookRunFor + 2*w.attemptTimeout()
}

// NextRetry applies Backoff when set; otherwise River's policy.
func (w *WebhookDeliverWorker) NextRetry(job *river.Job[WebhookDeliverArgs]) time.Time {
	if w.Backoff == nil {
		return time.Time{}
	}
	return time.Now().Add(w.Backoff(job.Attempt))
}

func (w *WebhookDeliverWorker) attemptTimeout() time.Duration {
	if w.AttemptTimeout > 0 {
		return w.AttemptTimeout
	}
	return WebhookAttemptTimeout
}

// httpClient is made once: endpoints are delivered to concurrently.
func (w *WebhookDeliverWorker) httpClient() *http.Client {
	w.clientOnce.Do(func() { w.client = webhooks.NewClient(w.AllowPrivate, w.attemptTimeout(), w.Lookup) })
	return w.client
}

// Work delivers for up to webhookRunFor; what is left waits for the next
// dispatch. A job cancelled by shutdown returns the context's error, which
// River takes as a stop, not a failure: the job goes back to available with
// no error recorded and no attempt spent, and the cursor is where the last
// 2xx put it, so any instance resumes from the same event and webhook-id.
func (w *WebhookDeliverWorker) Work(ctx context.Context, job *river.Job[WebhookDeliverArgs]) error {
	id := job.Args.EndpointID
	until := time.Now().Add(webhookRunFor)
	for time.Now().Before(until) {
		t, events, scanned, err := w.Store.WebhookPending(ctx, id, webhookWindow)
		var expired *domain.ErrCursorExpired
		switch {
		case errors.As(err, &expired):
			return w.Store.WebhookPauseFor(ctx, id, "events after its cursor were pruned: "+expired.Error())
		case isNotFound(err):
			return nil // deleted
		case err != nil:
			return err
		case t.Paused || scanned <= t.Cursor:
			return nil
		}
		for _, e := range events {
			msgs := WebhookMessages(t, e)
			for i, m := range msgs {
				// The cursor passes e only with its last delivery: a retry
				// resends e's earlier ones too (same webhook-ids).
				through := e.Seq - 1
				if i == len(msgs)-1 {
					through = e.Seq
				}
				if err := w.deliver(ctx, t, e.Seq, m, through); errors.Is(err, errPaused) {
					return nil // the cursor stays before e: resuming delivers it first
				} else if err != nil {
					return err
				}
			}
		}
		if err := w.Store.WebhookAdvance(ctx, id, scanned); err != nil {
			return err
		}
	}
	return nil
}

func isNotFound(err error) bool {
	e, ok := domain.AsError(err)
	return ok && e.Code == domain.CodeNotFound
}

// stockChangedData is the data of a stock.changed or preorder.allocated
// delivery.
type stockChangedData struct {
	Seq       int64     `json:"seq"`
	SKU       string    `json:"sku"`
	Location  string    `json:"location"`
	Cause     string    `json:"cause"`
	OnHand    int       `json:"onHand"`
	Reserved  int       `json:"reserved"`
	Committed int       `json:"committed"`
	Available int       `json:"available"`
	At        time.Time `json:"at"`
	// PreviousSeq is the seq of the balance's previous event (0: none, null:
	// pruned). Every event of a balance the endpoint selects is delivered as
	// stock.changed, so a consumer that tracks a balance knows it missed one
	// when this is not the last seq it got for that balance.
	PreviousSeq *int64 `json:"previousSeq"`
}

// stockLevelData is the data of a stock.low, stock.out or stock.back_in
// delivery.
type stockLevelData struct {
	stockChangedData
	PreviousAvailable int  `json:"previousAvailable"`
	Threshold         *int `json:"threshold,omitempty"` // stock.low only
}

// reservationData is the data of a reservation.expired or
// reservation.confirmed delivery.
type reservationData struct {
	Seq           int64               `json:"seq"`
	ReservationID string              `json:"reservationId"`
	At            time.Time           `json:"at"`
	Lines         []store.WebhookLine `json:"lines"`
}

// waitlistOfferedData is the data of a waitlist.offered delivery: the entry,
// its checkout, and the HELD reservation it was handed (Quantity units of
// SKU; Location is the balance of the event it is delivered at, and Lines
// what it holds at each location: more than one for an entry without a
// location, whose units were sourced as a reserve would source them).
type waitlistOfferedData struct {
	Seq           int64                    `json:"seq"`
	EntryID       string                   `json:"entryId"`
	CheckoutID    string                   `json:"checkoutId"`
	ReservationID string                   `json:"reservationId"`
	SKU           string                   `json:"sku"`
	Location      string                   `json:"location"`
	Quantity      int                      `json:"quantity"`
	Lines         []store.WebhookOfferLine `json:"lines"`
	At            time.Time                `json:"at"`
}

// orderActionData is the data of an order.fulfilled or order.cancelled
// delivery: one per fulfillOrder or cancelOrder, with what it moved per
// (SKU, location) and a cancel's reason.
type orderActionData struct {
	Seq       int64                    `json:"seq"`
	OrderRef  string                   `json:"orderRef"`
	Reference string                   `json:"reference"`
	Reason    *string                  `json:"reason,omitempty"`
	Lines     []store.WebhookOrderLine `json:"lines"`
	At        time.Time                `json:"at"`
}

func body(topic domain.WebhookTopic, at time.Time, data any) []byte {
	b, _ := json.Marshal(struct { //nolint:errchkjson // plain structs, cannot fail
		Type      string    `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Data      any       `json:"data"`
	}{topic.Name(), at.UTC(), data})
	return b
}

func changedData(e store.WebhookEvent) stockChangedData {
	return stockChangedData{e.Seq, e.SKU, e.Location, string(e.Cause), e.OnHand, e.Reserved, e.Committed, e.Available(), e.At.UTC(), e.PreviousSeq}
}

// WebhookMessage is one delivery of one event under one topic.
type WebhookMessage struct {
	Topic domain.WebhookTopic
	ID    string // webhook-id
	Body  []byte
}

// WebhookMessages are the deliveries event e makes to endpoint t, in topic
// order: stock.changed, stock.low, stock.out, stock.back_in,
// reservation.expired, reservation.confirmed, preorder.allocated,
// waitlist.offered, order.fulfilled, order.cancelled.
func WebhookMessages(t store.WebhookTarget, e store.WebhookEvent) []WebhookMessage {
	var out []WebhookMessage
	add := func(topic domain.WebhookTopic, data any) {
		if t.Has(topic) {
			out = append(out, WebhookMessage{topic, domain.WebhookMessageID(e.Seq, topic), body(topic, e.At, data)})
		}
	}
	add(domain.TopicStockChanged, changedData(e))
	if p := e.PreviousAvailable; p != nil {
		now, low := e.Available(), t.LowStockThreshold
		if e.LowStockThreshold != nil {
			low = *e.LowStockThreshold // the SKU's own
		}
		level := stockLevelData{stockChangedData: changedData(e), PreviousAvailable: *p}
		if *p > low && now <= low {
			withThreshold := level
			withThreshold.Threshold = &low
			add(domain.TopicStockLow, withThreshold)
		}
		if *p > 0 && now <= 0 {
			add(domain.TopicStockOut, level)
		}
		if *p <= 0 && now > 0 {
			add(domain.TopicStockBackIn, level)
		}
	}
	if e.FirstOfReservation && e.ReservationID != nil {
		data := reservationData{e.Seq, *e.ReservationID, e.At.UTC(), e.Lines}
		switch e.Cause {
		case domain.CauseExpired:
			add(domain.TopicReservationExpired, data)
		case domain.CauseConfirmed:
			add(domain.TopicReservationConfirmed, data)
		}
	}
	if e.Cause == domain.CausePreorderAllocated {
		add(domain.TopicPreorderAllocated, changedData(e))
	}
	if o := e.Offer; o != nil && e.ReservationID != nil {
		add(domain.TopicWaitlistOffered, waitlistOfferedData{e.Seq, o.EntryID, o.CheckoutID, *e.ReservationID, e.SKU, e.Location, o.Quantity, o.Lines, e.At.UTC()})
	}
	if a := e.OrderAction; a != nil {
		data := orderActionData{e.Seq, a.OrderRef, a.Reference, a.Reason, a.Lines, e.At.UTC()}
		switch e.Cause {
		case domain.CauseFulfilled:
			add(domain.TopicOrderFulfilled, data)
		case domain.CauseCancelled:
			add(domain.TopicOrderCancelled, data)
		}
	}
	return out
}

// errPaused is a failed delivery that paused the endpoint.
var errPaused = errors.New("webhook endpoint paused")

// deliver posts one message of event seq and records the attempt, moving the
// cursor to through on success. It returns nil when the receiver answered
// 2xx, errPaused when the failure paused the endpoint.
func (w *WebhookDeliverWorker) deliver(ctx context.Context, t store.WebhookTarget, seq int64, m WebhookMessage, through int64) error {
	msgID := m.ID
	a, err := sendAttempt(ctx, w.httpClient(), w.AllowPrivate, w.attemptTimeout(), t,
		store.WebhookAttempt{WebhookID: msgID, EventSeq: &seq, Topic: m.Topic.Name()}, m.Body)
	if w.OnAttempt != nil {
		w.OnAttempt(err == nil, a.Latency)
	}
	if err == nil {
		return w.Store.WebhookDelivered(ctx, t.ID, a, through)
	}
	if ctx.Err() != nil {
		return ctx.Err() // shutting down or out of time: not the receiver's fault, nothing recorded
	}
	msg := *a.Error
	pauseAfter := w.PauseAfter
	if pauseAfter <= 0 {
		pauseAfter = WebhookMaxAttempts
	}
	paused, rerr := w.Store.WebhookFailed(ctx, t.ID, a, pauseAfter)
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	if paused {
		if w.Logger != nil {
			w.Logger.WarnContext(ctx, "webhook endpoint paused after failed deliveries", "endpoint", t.ID, "error", msg)
		}
		return errPaused
	}
	return fmt.Errorf("webhook %s, %s: %w", t.ID, msgID, err)
}

// sendAttempt posts one signed message (a.WebhookID, body) to t and returns
// a filled in as the delivery log records it — latency, status, error — and
// the error of the post. Deliveries and test sends both go through it.
func sendAttempt(ctx context.Context, client *http.Client, allowPrivate bool, timeout time.Duration,
	t store.WebhookTarget, a store.WebhookAttempt, body []byte) (store.WebhookAttempt, error) {
	ctx, span := startDeliverySpan(ctx, t, a)
	defer span.End()
	start := time.Now()
	status, err := webhooks.Post(ctx, client, t.URL, allowPrivate, timeout, a.WebhookID, body, t.Secrets...)
	a.Latency = time.Since(start)
	if status != 0 {
		a.StatusCode = &status
	}
	if err != nil {
		msg := err.Error()
		a.Error = &msg
	}
	endDeliverySpan(span, status, err)
	return a, err
}
