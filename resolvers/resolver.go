// Package resolvers holds the hand-written GraphQL resolvers. Each one checks
// authorization, maps its input, makes one call into the domain and maps the
// result; business refusals become payload userErrors, everything else is
// returned for the error presenter.
package resolvers

import (
	"sync"
	"time"

	"inventory/domain"
	"inventory/graph/model"
)

// TokenIssuer mints checkout tokens. auth.CheckoutTokens is one.
type TokenIssuer interface {
	Issue(checkoutID string, ttlSeconds *int) (string, time.Time, error)
}

// Resolver is the root resolver; main wires its fields.
type Resolver struct {
	Catalog      domain.Catalog
	Stock        domain.Stock
	Reconciler   domain.Reconciler
	Reservations domain.Reservations
	Orders       domain.Orders
	// Waitlists is the store's waitlists; WaitlistFeed what waitlistChanged
	// reads (the store) and WaitlistSignals what wakes it (the broker).
	Waitlists       domain.Waitlists
	WaitlistFeed    domain.WaitlistFeed
	WaitlistSignals domain.WaitlistSignals
	// WaitlistOverview is what the admin waitlist panel reads.
	WaitlistOverview domain.WaitlistOverview
	UnitCodes        domain.Codes
	Events           domain.StockEvents
	Broker           domain.StockEventStream
	Tokens           TokenIssuer
	Webhooks         domain.Webhooks
	// WebhookTester sends sendTestWebhook's deliveries.
	WebhookTester domain.WebhookTester
	// Pages reads the Relay connections' keyset pages, and Cursors signs
	// and opens their cursors (cursor.Signer, keyed from the token secrets).
	Pages   domain.ListPages
	Cursors Cursors
	// FairUse bounds checkout tokens' holds (domain.FairUse.For).
	FairUse domain.FairUse
	// Live is where availabilityChanged reads values from the database
	// (the store), each read holding a slot of LiveShare.
	Live AvailabilitySource
	// LiveShare bounds availabilityChanged's database reads to the share of
	// the pool that anonymous reads have (api.AnonymousShare); nil is no
	// bound.
	LiveShare ReadShare
	// LiveMemory, if set, answers availabilityChanged from the instance's
	// in-memory copy of the balances while it is fresh (avail.Copy).
	LiveMemory AvailabilityMemory
	// PushInterval is INVENTORY_AVAILABILITY_PUSH_INTERVAL: availabilityChanged
	// sends each SKU at most once per interval; 0 is the default.
	PushInterval time.Duration

	// availabilityReads shares availabilityChanged's reads (readShared):
	// the read not yet answered per SKUs and locations.
	availabilityReadsMu sync.Mutex
	availabilityReads   map[string]*sharedRead
}

// outcome splits a domain call's result for a mutation payload: on success the
// value and no userErrors; on a business refusal a nil value (so the payload
// field is null) and the refusal as userErrors; any other error is returned for
// the error presenter.
func outcome[T any](v T, err error) (*T, []model.UserError, error) {
	if err == nil {
		return &v, []model.UserError{}, nil
	}
	e, ok := domain.AsError(err)
	if !ok {
		return nil, nil, err
	}
	ue := model.UserError{Code: e.Code, Message: e.Message, Field: e.Field, Line: e.Line, Available: e.Available}
	if e.SKU != "" {
		ue.Sku = &e.SKU
	}
	return nil, []model.UserError{ue}, nil
}

// stockChangePayload is a receipt's or an adjustment's BalancePayload:
// replayed tells a retry that found its change already made from the change
// itself, which the balance alone cannot.
func stockChangePayload(c *domain.StockChange, ue []model.UserError) *model.BalancePayload {
	if c == nil {
		return &model.BalancePayload{UserErrors: ue}
	}
	return &model.BalancePayload{Balance: &c.Balance, Replayed: c.Replayed, UserErrors: ue}
}

func deref[T any](p *T) T {
	var zero T
	return orDefault(p, zero)
}

// orDefault is *p, or def when the client sent null.
func orDefault[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// secretPayload maps an endpoint with its secret (create, rotate) to its payload.
func secretPayload(res *domain.WebhookSecret, ue []model.UserError) *model.WebhookSecretPayload {
	if res == nil {
		return &model.WebhookSecretPayload{UserErrors: ue}
	}
	return &model.WebhookSecretPayload{Webhook: &res.Webhook, Secret: &res.Secret, UserErrors: ue}
}
