package resolvers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"inventory/domain"
)

// MaxAvailabilityChangedSKUs bounds one availabilityChanged subscription: a
// product page (or a listing) watches a handful of SKUs, and each one costs
// a read per push interval while it changes.
const MaxAvailabilityChangedSKUs = 100

// DefaultAvailabilityPushInterval is INVENTORY_AVAILABILITY_PUSH_INTERVAL's
// default: how often a changed SKU's value is pushed at most.
const DefaultAvailabilityPushInterval = 250 * time.Millisecond

// AvailabilitySource is where availabilityChanged reads its values: the
// store today (store.Store is one); an instance's in-memory copy of the
// balances can take its place, as long as its reads never go backwards.
type AvailabilitySource interface {
	// StockEventsLatest is the newest published seq: every change with a
	// higher seq is yet to arrive on the event stream.
	StockEventsLatest(ctx context.Context) (int64, error)
	// AvailabilityList reads each SKU's current value, nil for an unknown one.
	AvailabilityList(ctx context.Context, q domain.AvailabilityQuery) ([]*domain.Availability, error)
}

// availabilityChangedQuery validates the subscription's arguments and drops
// repeated SKUs (one message per SKU).
func availabilityChangedQuery(skus, locations []string) (domain.AvailabilityQuery, error) {
	q := domain.AvailabilityQuery{Locations: locations}
	for _, s := range skus {
		if !slices.Contains(q.SKUs, s) {
			q.SKUs = append(q.SKUs, s)
		}
	}
	switch {
	case len(q.SKUs) == 0:
		return q, domain.Limitf("availabilityChanged needs at least one SKU")
	case len(q.SKUs) > MaxAvailabilityChangedSKUs:
		return q, domain.Limitf("availabilityChanged accepts at most %d SKUs per subscription, got %d", MaxAvailabilityChangedSKUs, len(q.SKUs))
	}
	return q, q.Validate()
}

// availabilityChanges starts one availabilityChanged subscription. The
// stream is joined at the newest published seq read before the first
// values are: every change those values miss has a higher seq, so it
// arrives and marks its SKU changed. Events only mark SKUs (never
// blocking the stream, so a slow reader is never cut off); every push
// interval the changed SKUs are read again, and each read is later than the
// one before, so a value never follows a newer one. Values waiting to be
// sent are replaced by newer ones, one per SKU (latest).
func (r *Resolver) availabilityChanges(ctx context.Context, q domain.AvailabilityQuery) (<-chan *domain.Availability, error) {
	after, err := r.Live.StockEventsLatest(ctx)
	if err != nil {
		return nil, fmt.Errorf("availabilityChanged: %w", err)
	}
	first, err := r.Live.AvailabilityList(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("availabilityChanged: %w", err)
	}
	var unknown []string
	for i, a := range first {
		if a == nil {
			unknown = append(unknown, q.SKUs[i])
		}
	}
	if len(unknown) > 0 {
		e := domain.Errorf(domain.CodeUnknownSKU, "unknown SKU %s: availabilityChanged watches existing SKUs only", strings.Join(unknown, ", "))
		e.SKU = unknown[0]
		return nil, e
	}
	sink := newAvailabilitySink(q)
	r.Broker.SubscribeStockEvents(ctx, &after, sink, subscriptionEnded(ctx))
	out := make(chan *domain.Availability)
	interval := r.PushInterval
	if interval <= 0 {
		interval = DefaultAvailabilityPushInterval
	}
	go r.pushAvailability(ctx, q, first, sink, interval, out)
	return out, nil
}

// pushAvailability sends first, then each tick reads the SKUs changed since
// the last one and queues their values, until ctx or the stream ends.
func (r *Resolver) pushAvailability(ctx context.Context, q domain.AvailabilityQuery, first []*domain.Availability, sink *availabilitySink, interval time.Duration, out chan<- *domain.Availability) {
	defer close(out)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var queue latest[*domain.Availability]
	sent := map[string]*domain.Availability{}
	for _, a := range first {
		queue.put(a.SKU, a)
	}
	for {
		var send chan<- *domain.Availability // nil (never ready) while nothing waits
		next, waiting := queue.peek()
		if waiting {
			send = out
		}
		select {
		case <-ctx.Done():
			return
		case <-sink.closed: // the stream ended; subscriptionEnded said why
			return
		case send <- next:
			queue.pop()
			sent[next.SKU] = next
		case <-tick.C:
			changed := sink.dirty.take(q.SKUs)
			if len(changed) == 0 {
				continue
			}
			values, err := r.Live.AvailabilityList(ctx, domain.AvailabilityQuery{SKUs: changed, Locations: q.Locations})
			if err != nil {
				// Read again at the next tick: the values are still owed.
				for _, s := range changed {
					sink.dirty.mark(s)
				}
				continue
			}
			for _, a := range values {
				if a != nil && !sameAvailability(sent[a.SKU], a) {
					queue.put(a.SKU, a)
				}
			}
		}
	}
}

// availabilitySink is the stream's end of one availabilityChanged
// subscription: it marks the watched SKUs that an event touches, at once.
type availabilitySink struct {
	skus      map[string]bool
	locations map[string]bool // nil: every location
	dirty     dirtySet
	closed    chan struct{}
}

func newAvailabilitySink(q domain.AvailabilityQuery) *availabilitySink {
	s := &availabilitySink{skus: map[string]bool{}, closed: make(chan struct{})}
	for _, k := range q.SKUs {
		s.skus[k] = true
	}
	if q.Locations != nil {
		s.locations = map[string]bool{}
		for _, l := range q.Locations {
			s.locations[l] = true
		}
	}
	return s
}

// Deliver implements domain.StockEventSink; it never waits.
func (s *availabilitySink) Deliver(_ context.Context, e domain.StockEvent, _ <-chan struct{}, _ func() <-chan time.Time) (domain.Delivery, error) {
	if s.skus[e.SKU] && (s.locations == nil || s.locations[e.Location]) {
		s.dirty.mark(e.SKU)
	}
	return domain.Delivered, nil
}

// Close implements domain.StockEventSink.
func (s *availabilitySink) Close() { close(s.closed) }

// sameAvailability: b shows nothing a has not shown (a nil: nothing sent).
func sameAvailability(a, b *domain.Availability) bool {
	if a == nil || len(a.Locations) != len(b.Locations) {
		return false
	}
	for i, x := range a.Locations {
		y := b.Locations[i]
		if x.Location != y.Location || x.OnHand != y.OnHand || x.Reserved != y.Reserved ||
			x.PendingSupply != y.PendingSupply || x.Preordered != y.Preordered || !x.UpdatedAt.Equal(y.UpdatedAt) {
			return false
		}
	}
	return true
}
