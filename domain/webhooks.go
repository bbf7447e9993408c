package domain

import (
	"context"
	"fmt"
	"time"
)

// WebhookTopic is what an outbound webhook is sent for. The values are the
// GraphQL enum names; Name is the topic as deliveries carry it ("type").
type WebhookTopic string

// Topics delivered so far.
const (
	// TopicStockChanged is every published stock event, filtered by the
	// endpoint's SKUs and locations.
	TopicStockChanged WebhookTopic = "STOCK_CHANGED"
	// TopicStockLow is a balance's available falling from above the
	// endpoint's LowStockThreshold to at or below it.
	TopicStockLow WebhookTopic = "STOCK_LOW"
	// TopicStockOut is a balance's available falling from above 0 to 0 or
	// below.
	TopicStockOut WebhookTopic = "STOCK_OUT"
	// TopicStockBackIn is a balance's available rising from 0 or below to
	// above 0.
	TopicStockBackIn WebhookTopic = "STOCK_BACK_IN"
	// TopicReservationExpired is a reservation that expired: one delivery
	// per reservation, at its first EXPIRED event the endpoint selects.
	TopicReservationExpired WebhookTopic = "RESERVATION_EXPIRED"
	// TopicReservationConfirmed is a confirmed reservation, likewise.
	TopicReservationConfirmed WebhookTopic = "RESERVATION_CONFIRMED"
	// TopicPreorderAllocated is stock received allocated to pre-orders: one
	// delivery per PREORDER_ALLOCATED event (per balance and order line).
	TopicPreorderAllocated WebhookTopic = "PREORDER_ALLOCATED"
	// TopicWaitlistOffered is a waitlist entry handed a HELD reservation:
	// one delivery per offer, at the offer's RESERVED event (an offer's
	// reservation has one line, so one event).
	TopicWaitlistOffered WebhookTopic = "WAITLIST_OFFERED"
	// TopicOrderFulfilled is a fulfillOrder: one delivery per shipment, at
	// the first of its FULFILLED events that passes the filters, with all
	// its lines.
	TopicOrderFulfilled WebhookTopic = "ORDER_FULFILLED"
	// TopicOrderCancelled is a cancelOrder, likewise.
	TopicOrderCancelled WebhookTopic = "ORDER_CANCELLED"
)

var topicNames = map[WebhookTopic]string{
	TopicStockChanged:         "stock.changed",
	TopicStockLow:             "stock.low",
	TopicStockOut:             "stock.out",
	TopicStockBackIn:          "stock.back_in",
	TopicReservationExpired:   "reservation.expired",
	TopicReservationConfirmed: "reservation.confirmed",
	TopicPreorderAllocated:    "preorder.allocated",
	TopicWaitlistOffered:      "waitlist.offered",
	TopicOrderFulfilled:       "order.fulfilled",
	TopicOrderCancelled:       "order.cancelled",
}

// Name is the topic as a delivery's "type" carries it, e.g. "stock.changed".
func (t WebhookTopic) Name() string { return topicNames[t] }

// Webhook limits.
const (
	MaxWebhookSKUs        = 500
	MaxWebhookLocations   = 100
	MaxWebhookDeliveries  = 100 // delivery log entries in one answer
	MaxWebhookPauseReason = 500
	MaxWebhookEndpoints   = 100
	// DefaultLowStockThreshold is an endpoint's stock.low threshold when
	// none is given.
	DefaultLowStockThreshold = 5
	MaxLowStockThreshold     = 1_000_000_000
)

// WebhookEndpoint is an admin-registered receiver of outbound webhooks.
type WebhookEndpoint struct {
	ID        string
	URL       string
	Topics    []WebhookTopic
	SKUs      []string // empty: every SKU
	Locations []string // empty: every location
	// LowStockThreshold: stock.low fires when available falls from above it
	// to at or below it, for SKUs without a threshold of their own
	// (SKU.LowStockThreshold).
	LowStockThreshold int
	// CursorSeq is the stock event seq delivered up to: delivery resumes
	// after it, across restarts and pauses.
	CursorSeq           int64
	PausedAt            *time.Time
	PauseReason         *string
	ConsecutiveFailures int
	// PreviousSecretUntil: until then, deliveries are also signed with the
	// secret before the last rotation.
	PreviousSecretUntil *time.Time
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

// Paused reports whether deliveries to the endpoint are stopped.
func (w WebhookEndpoint) Paused() bool { return w.PausedAt != nil }

// WebhookSecret is an endpoint with its signing secret, shown once: when it is
// created and when the secret is rotated.
type WebhookSecret struct {
	Webhook WebhookEndpoint
	Secret  string
}

// CreateWebhookInput registers an endpoint.
type CreateWebhookInput struct {
	URL       string
	Topics    []WebhookTopic
	SKUs      []string
	Locations []string
	// LowStockThreshold: DefaultLowStockThreshold when nil.
	LowStockThreshold *int
}

// UpdateWebhookInput changes an endpoint; nil fields stay as they are, an
// empty SKUs or Locations list removes that filter.
type UpdateWebhookInput struct {
	ID        string
	URL       *string
	Topics    []WebhookTopic
	SKUs      []string
	Locations []string
	// LowStockThreshold: unchanged when nil.
	LowStockThreshold *int
}

// Validate checks the input; checkURL is the URL policy in force (scheme,
// credentials, private addresses).
func (in CreateWebhookInput) Validate(checkURL func(string) error) error {
	if err := checkURL(in.URL); err != nil {
		return InvalidInput([]string{"input", "url"}, "%v", err)
	}
	if len(in.Topics) == 0 {
		return InvalidInput([]string{"input", "topics"}, "give at least one topic")
	}
	if err := CheckLowStockThreshold([]string{"input", "lowStockThreshold"}, in.LowStockThreshold); err != nil {
		return err
	}
	return validateWebhookFilters(in.Topics, in.SKUs, in.Locations)
}

// CheckLowStockThreshold refuses a stock.low threshold outside 0 to
// MaxLowStockThreshold (nil is none, and valid).
func CheckLowStockThreshold(field []string, t *int) error {
	if t != nil && (*t < 0 || *t > MaxLowStockThreshold) {
		return InvalidInput(field, "must be between 0 and %d", MaxLowStockThreshold)
	}
	return nil
}

// Validate checks the fields that are set.
func (in UpdateWebhookInput) Validate(checkURL func(string) error) error {
	if in.URL != nil {
		if err := checkURL(*in.URL); err != nil {
			return InvalidInput([]string{"input", "url"}, "%v", err)
		}
	}
	if in.Topics != nil && len(in.Topics) == 0 {
		return InvalidInput([]string{"input", "topics"}, "give at least one topic")
	}
	if err := CheckLowStockThreshold([]string{"input", "lowStockThreshold"}, in.LowStockThreshold); err != nil {
		return err
	}
	return validateWebhookFilters(in.Topics, in.SKUs, in.Locations)
}

func validateWebhookFilters(topics []WebhookTopic, skus, locations []string) error {
	seen := map[WebhookTopic]bool{}
	for _, t := range topics {
		if t.Name() == "" {
			return InvalidInput([]string{"input", "topics"}, "unknown topic %q", t)
		}
		if seen[t] {
			return InvalidInput([]string{"input", "topics"}, "topic %s given twice", t)
		}
		seen[t] = true
	}
	if len(skus) > MaxWebhookSKUs {
		return InvalidInput([]string{"input", "skus"}, "at most %d SKUs", MaxWebhookSKUs)
	}
	if len(locations) > MaxWebhookLocations {
		return InvalidInput([]string{"input", "locations"}, "at most %d locations", MaxWebhookLocations)
	}
	for _, f := range [][]string{skus, locations} {
		for _, c := range f {
			if c == "" || len(c) > 200 {
				return InvalidInput([]string{"input"}, "filter codes must be 1 to 200 characters")
			}
		}
	}
	return nil
}

// WebhookDelivery is one attempt to deliver one event to one endpoint.
type WebhookDelivery struct {
	ID int64
	// WebhookID is the webhook-id header: the same for every attempt of one
	// event to one endpoint ("evt_<seq>").
	WebhookID  string
	EventSeq   *int64
	Topic      string
	Attempt    int
	StatusCode *int
	LatencyMs  int
	Error      *string
	At         time.Time
}

// WebhookEventID is the stable webhook-id of the stock.changed delivery of
// stock event seq.
func WebhookEventID(seq int64) string { return fmt.Sprintf("evt_%d", seq) }

// WebhookMessageID is the stable webhook-id of the delivery of topic for
// stock event seq: evt_<seq> for stock.changed, evt_<seq>.<topic name> for
// the others (one event can be delivered under several topics).
func WebhookMessageID(seq int64, t WebhookTopic) string {
	if t == TopicStockChanged {
		return WebhookEventID(seq)
	}
	return fmt.Sprintf("evt_%d.%s", seq, t.Name())
}

// Webhooks manages outbound webhook endpoints. Unknown ids are NOT_FOUND.
// Implemented by store.Store.
type Webhooks interface {
	WebhookCreate(ctx context.Context, in CreateWebhookInput) (WebhookSecret, error)
	WebhookList(ctx context.Context) ([]WebhookEndpoint, error)
	WebhookUpdate(ctx context.Context, in UpdateWebhookInput) (WebhookEndpoint, error)
	WebhookPause(ctx context.Context, id, reason string) (WebhookEndpoint, error)
	// WebhookResume restarts delivery after the cursor (after the oldest
	// retained event when older ones were pruned while it was paused).
	WebhookResume(ctx context.Context, id string) (WebhookEndpoint, error)
	WebhookDelete(ctx context.Context, id string) (WebhookEndpoint, error)
	// WebhookRotateSecret makes a new secret; the old one keeps signing
	// alongside it for WebhookSecretOverlap.
	WebhookRotateSecret(ctx context.Context, id string) (WebhookSecret, error)
	// WebhookDeliveryList is the endpoint's delivery log, newest first, after
	// the delivery id after (0 for the newest).
	WebhookDeliveryList(ctx context.Context, endpointID string, first int, after int64) ([]WebhookDelivery, error)
}

// WebhookTester sends test deliveries; jobs implements it next to real
// deliveries, with the same client and signing.
type WebhookTester interface {
	// WebhookSendTest posts one signed webhook.test delivery to the endpoint
	// now and records it (attempt 1) without moving the cursor. A receiver
	// that fails is not an error: the recorded delivery says how it answered.
	WebhookSendTest(ctx context.Context, id string) (WebhookDelivery, error)
}

// WebhookTestType is the type of the delivery sendTestWebhook makes.
const WebhookTestType = "webhook.test"

// WebhookSecretOverlap is how long a rotated-out secret keeps signing.
const WebhookSecretOverlap = 24 * time.Hour
