package resolvers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"inventory/domain"
	"inventory/fanout"
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

// ReadShare bounds database reads made for callers who have no share of
// the pool of their own: Acquire waits for a slot (or ctx) and returns its
// release.
type ReadShare interface {
	Acquire(ctx context.Context) (release func(), err error)
}

// AvailabilityMemory answers availability from an instance's in-memory copy
// of the balances (avail.Copy is one): ok is false when it cannot (stale,
// loading, an unknown code); seq is the newest stock event the answer
// holds. Its answers never go backwards.
type AvailabilityMemory interface {
	Get(q domain.AvailabilityQuery) (out []*domain.Availability, seq int64, ok bool)
}

// shared runs read holding a slot of r.LiveShare, if there is one.
func (r *Resolver) shared(ctx context.Context, read func() error) error {
	if r.LiveShare == nil {
		return read()
	}
	release, err := r.LiveShare.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("waiting for the anonymous share of the database: %w", err)
	}
	defer release()
	return read()
}

// canonical is q with its SKUs and locations sorted and deduplicated: the
// same question however it is spelled, so that subscriptions share its
// read.
func canonical(q domain.AvailabilityQuery) domain.AvailabilityQuery {
	c := domain.AvailabilityQuery{SKUs: slices.Compact(slices.Sorted(slices.Values(q.SKUs)))}
	if q.Locations != nil {
		c.Locations = slices.Compact(slices.Sorted(slices.Values(q.Locations)))
	}
	return c
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
	first, after, fromMemory, err := r.firstAvailability(ctx, q)
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
	go r.pushAvailability(ctx, q, first, fromMemory, sink, interval, out)
	// Shared by a group (fanout), a value replaces its SKU's older ones.
	return fanout.Tag(ctx, out, func(a *domain.Availability) (string, int64) { return a.SKU, 0 }), nil
}

// firstAvailability is a subscription's first values and the seq to join
// the stream after: from the in-memory copy when it can answer (the values
// hold exactly the events up to its seq, so every later change arrives), else
// from the database (the newest published seq read before the values, so
// every change they miss arrives), holding a slot of the share.
func (r *Resolver) firstAvailability(ctx context.Context, q domain.AvailabilityQuery) (first []*domain.Availability, after int64, fromMemory bool, err error) {
	if r.LiveMemory != nil {
		// A SKU the copy does not know may have been created within its
		// bound: the database says whether it is unknown.
		if first, after, ok := r.LiveMemory.Get(q); ok && !slices.Contains(first, nil) {
			return first, after, true, nil
		}
	}
	err = r.shared(ctx, func() error {
		if after, err = r.Live.StockEventsLatest(ctx); err != nil {
			return err
		}
		first, err = r.Live.AvailabilityList(ctx, q)
		return err
	})
	return first, after, false, err
}

// sharedRead is one availability read that subscriptions asking the same
// thing at the same tick share (Resolver.availabilityReads): the product
// pages of one hot SKU cost one read per push interval between them.
type sharedRead struct {
	started time.Time // the read is sent no earlier: its snapshot is later
	ended   time.Time // after its answer: a later read's snapshot is later
	values  []*domain.Availability
	err     error
	done    chan struct{} // closed when values and err are set
}

// sharedReadGrace is how long after the first subscription of a tick asks
// the read is sent, so the others of that tick (woken at the same moment,
// run one after another on a few cores) join it.
const sharedReadGrace = 2 * time.Millisecond

// sharedReadStragglerGrace is how long a second read of one tick waits: a
// subscription that took its SKUs after the tick's read was sent is one of
// the stragglers of a loaded machine (woken late), and the others are
// behind it. With sharedReadGrace for that one too, a loaded run made 89
// reads in 39 ticks for 200 subscribers of one SKU (some ticks three).
const sharedReadStragglerGrace = 4 * sharedReadGrace

// readShared reads q for a subscription whose changed SKUs were last marked
// at markedAt, after the events that marked them were committed. It joins a
// read of the same SKUs and locations that is sent after markedAt (so the
// read's snapshot holds every one of those events) — also when this
// subscription's goroutine was woken late for its tick, as on a loaded
// machine, and the others' read is on its way — or starts one, sent sharedReadGrace from now (the straggler
// grace when an earlier read of the tick was sent already). The read is not
// bound to the subscription that happens to start it (it may leave), only
// to sharedReadTimeout.
func (r *Resolver) readShared(ctx context.Context, q domain.AvailabilityQuery, markedAt time.Time) (*sharedRead, error) {
	q = canonical(q)
	key := strings.Join(q.SKUs, "\x00") + "\x01"
	if q.Locations != nil {
		key += "L" + strings.Join(q.Locations, "\x00")
	}
	r.availabilityReadsMu.Lock()
	read := r.availabilityReads[key]
	if read == nil || !read.started.After(markedAt) {
		if r.availabilityReads == nil {
			r.availabilityReads = map[string]*sharedRead{}
		}
		grace := sharedReadGrace
		if read != nil {
			grace = sharedReadStragglerGrace
		}
		read = &sharedRead{started: time.Now().Add(grace), done: make(chan struct{})}
		r.availabilityReads[key] = read
		go r.sendSharedRead(context.WithoutCancel(ctx), key, q, read)
	}
	r.availabilityReadsMu.Unlock()
	select {
	case <-read.done:
		return read, read.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// sendSharedRead sends read at its start time and forgets it once answered
// (only reads sent after a subscription took its SKUs may serve it, so an
// answered one serves no later tick).
func (r *Resolver) sendSharedRead(ctx context.Context, key string, q domain.AvailabilityQuery, read *sharedRead) {
	ctx, cancel := context.WithTimeout(ctx, sharedReadTimeout)
	defer cancel()
	time.Sleep(time.Until(read.started))
	read.err = r.shared(ctx, func() (err error) {
		read.values, err = r.Live.AvailabilityList(ctx, q)
		return err
	})
	read.ended = time.Now()
	close(read.done)
	r.availabilityReadsMu.Lock()
	if r.availabilityReads[key] == read {
		delete(r.availabilityReads, key)
	}
	r.availabilityReadsMu.Unlock()
}

// sharedReadTimeout bounds one shared availability read.
const sharedReadTimeout = 10 * time.Second

// nextTick is how long until the next multiple of interval on the wall
// clock: every subscription with the same interval ticks at the same
// moments, so their reads of the same SKUs coincide and are shared. The
// multiple is the one after half an interval from now, so that a timer
// that fires a hair before its multiple (the wall clock slewed) does not
// tick twice around it: ticks stay at least half an interval apart.
func nextTick(interval time.Duration) time.Duration {
	now := time.Now()
	return now.Add(interval / 2).Truncate(interval).Add(interval).Sub(now)
}

// pushAvailability sends first, then each tick reads the SKUs changed since
// the last one and queues their values, until ctx or the stream ends.
//
// While fromMemory, the changed SKUs are read from the in-memory copy once it
// has applied every event the subscription saw; once the copy cannot answer
// (stale, reloading), the subscription reads the database from then on and
// never goes back: a copy read may be older than a database read before it,
// while a database read is never older than a copy read before it.
func (r *Resolver) pushAvailability(ctx context.Context, q domain.AvailabilityQuery, first []*domain.Availability, fromMemory bool, sink *availabilitySink, interval time.Duration, out chan<- *domain.Availability) {
	defer close(out)
	tick := time.NewTimer(nextTick(interval))
	defer tick.Stop()
	// A shared read may have started before this subscription's previous
	// read ended, and so show an older snapshot: only a read that started
	// after the previous one ended is taken, so values never go backwards.
	lastEnded := time.Now()
	behind := 0 // ticks the copy was behind the stream in a row
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
			tick.Reset(nextTick(interval))
			changed, markedAt := sink.dirty.take(q.SKUs)
			if len(changed) == 0 {
				continue
			}
			if fromMemory {
				values, seq, ok := r.LiveMemory.Get(domain.AvailabilityQuery{SKUs: changed, Locations: q.Locations})
				switch {
				case ok && seq >= sink.seen.Load():
					for _, a := range values {
						if a != nil && !sameAvailability(sent[a.SKU], a) {
							queue.put(a.SKU, a)
						}
					}
					lastEnded = time.Now()
					continue
				case ok && behind < maxMemoryBehind:
					// The copy has yet to apply what the stream delivered here.
					behind++
					for _, s := range changed {
						sink.dirty.mark(s)
					}
					continue
				}
				fromMemory = false
			}
			behind = 0
			read, err := r.readShared(ctx, domain.AvailabilityQuery{SKUs: changed, Locations: q.Locations}, markedAt)
			if err != nil || !read.started.After(lastEnded) {
				// Read again at the next tick: the values are still owed.
				for _, s := range changed {
					sink.dirty.mark(s)
				}
				continue
			}
			lastEnded = read.ended
			for _, a := range read.values {
				if a != nil && !sameAvailability(sent[a.SKU], a) {
					queue.put(a.SKU, a)
				}
			}
		}
	}
}

// maxMemoryBehind is how many ticks in a row a subscription waits for the
// in-memory copy to apply what the stream delivered before it reads the
// database instead.
const maxMemoryBehind = 4

// availabilitySink is the stream's end of one availabilityChanged
// subscription: it marks the watched SKUs that an event touches, at once,
// and notes the newest seq delivered (a copy that has applied it holds every
// change that marked a SKU).
type availabilitySink struct {
	skus      map[string]bool
	locations map[string]bool // nil: every location
	dirty     dirtySet
	seen      atomic.Int64
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
	s.seen.Store(e.Seq) // the stream delivers in seq order
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
		if x.Location != y.Location || x.OnHand != y.OnHand || x.Reserved != y.Reserved || x.Committed != y.Committed ||
			x.PendingSupply != y.PendingSupply || x.Preordered != y.Preordered || !x.UpdatedAt.Equal(y.UpdatedAt) {
			return false
		}
	}
	return true
}
