package jobs

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"

	"inventory/domain"
	"inventory/store"
	"inventory/webhooks"
)

// WebhookTestStore is what a test delivery reads and records. store.Store is one.
type WebhookTestStore interface {
	WebhookTestTarget(ctx context.Context, id string) (store.WebhookTarget, error)
	WebhookTestRecorded(ctx context.Context, id string, a store.WebhookAttempt) (domain.WebhookDelivery, error)
}

// WebhookTester is domain.WebhookTester: one signed webhook.test POST, sent
// as deliveries are (webhooks.Post), recorded in the endpoint's log.
type WebhookTester struct {
	Store        WebhookTestStore
	AllowPrivate bool
	// Lookup, if set, resolves target names (tests; see webhooks.DialContext).
	Lookup webhooks.Lookup
}

// WebhookSendTest sends and records one test delivery.
func (w *WebhookTester) WebhookSendTest(ctx context.Context, id string) (domain.WebhookDelivery, error) {
	t, err := w.Store.WebhookTestTarget(ctx, id)
	if err != nil {
		return domain.WebhookDelivery{}, err
	}
	msgID := "test_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	body, _ := json.Marshal(struct { //nolint:errchkjson // plain struct, cannot fail
		Type      string    `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Data      struct{}  `json:"data"`
	}{Type: domain.WebhookTestType, Timestamp: time.Now().UTC()})
	client := webhooks.NewClient(w.AllowPrivate, WebhookAttemptTimeout, w.Lookup)
	defer client.CloseIdleConnections()
	a, _ := sendAttempt(ctx, client, w.AllowPrivate, WebhookAttemptTimeout, t,
		store.WebhookAttempt{WebhookID: msgID, Topic: domain.WebhookTestType}, body) // a failed send is recorded, not returned
	return w.Store.WebhookTestRecorded(ctx, t.ID, a)
}
