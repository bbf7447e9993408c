package avail

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"inventory/domain"
)

// Run loads the copy and follows the stream until ctx ends, reloading when
// it must; loads that fail are retried with backoff (Get falls back to the
// database meanwhile).
func (c *Copy) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { c.maintain(ctx) })
	quick := 0 // follows in a row that ended within a second
	for backoff := 100 * time.Millisecond; ctx.Err() == nil; {
		if quick > 0 { // the stream keeps ending (the broker stopped?): do not spin
			select {
			case <-ctx.Done():
				return
			case <-time.After(min(time.Duration(quick)*100*time.Millisecond, 5*time.Second)):
			}
		}
		snap, err := c.store.AvailabilitySnapshot(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.logger.ErrorContext(ctx, "availability copy: cannot load; answering from the database", "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		started := time.Now()
		c.follow(ctx, snap)
		if time.Since(started) < time.Second {
			quick++
		} else {
			quick = 0
		}
	}
}

// follow installs snap and applies the stream after it until a reload is
// due or ctx ends; the copy is not ready when it returns.
func (c *Copy) follow(ctx context.Context, snap domain.AvailabilitySnapshot) {
	// Drain a reload asked for by the previous stream: this load answers it.
	select {
	case <-c.reload:
	default:
	}
	gen := c.stream.ListenGeneration()
	c.install(snap)
	c.reloads.Add(1)
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	ended := make(chan error, 1)
	closed := make(chan struct{})
	after := snap.Seq
	c.stream.FollowStockEvents(subCtx, &after, &sink{c: c, closed: closed}, func(err error) { ended <- err })
	ticker := time.NewTicker(c.cfg.ProbeInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
		case err := <-ended:
			if ctx.Err() == nil {
				c.logger.WarnContext(ctx, "availability copy: stream ended; reloading", "err", err)
			}
		case <-c.reload:
			c.logger.InfoContext(ctx, "availability copy: reloading")
		case <-c.appliedSig:
			// Right after a fetch was applied, the head that fetch read (in
			// its own snapshot, with the relay batch that made it) says how
			// stale the copy is, so staleness drops at once instead of at
			// the next probe tick, and without a query of its own; the
			// ticker then restarts, so a busy stream is not probed at all.
			if h, ok := c.stream.StockHead(); ok {
				c.noteHead(probe{head: h.Seq, caughtUp: h.CaughtUp})
			} else {
				c.measure(ctx)
			}
			ticker.Reset(c.cfg.ProbeInterval)
			continue
		case <-ticker.C:
			if g := c.stream.ListenGeneration(); g != gen {
				c.logger.InfoContext(ctx, "availability copy: LISTEN reconnected; reloading")
			} else {
				// A head the stream read recently (at idle: this
				// instance's relay, every tick) is as good as a probe and
				// costs no query; its staleness counts from the head's own
				// snapshot, so an older head only makes the lag look
				// larger. headReuse bounds how much larger.
				if h, ok := c.stream.StockHead(); ok && time.Since(h.At) < c.headReuse() {
					c.noteHead(probe{head: h.Seq, caughtUp: h.CaughtUp})
				} else {
					c.measure(ctx)
				}
				continue
			}
		}
		break
	}
	cancel()
	<-closed // no Deliver runs after this
	c.mu.Lock()
	c.ready = false
	c.probes = nil
	c.mu.Unlock()
}

// headReuse is how old the stream's head may be and still stand in for a
// probe: two probe intervals, or an eighth of MaxLag if that is longer, so
// relay ticks that a busy machine runs late do not turn into a query each
// while the lag the copy reports stays well within its bound.
func (c *Copy) headReuse() time.Duration {
	return max(2*c.cfg.ProbeInterval, c.cfg.MaxLag/8)
}

// measure reads the head and, once it is applied, moves caughtUp.
func (c *Copy) measure(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(c.cfg.MaxLag, time.Second))
	defer cancel()
	started := time.Now()
	head, lag, err := c.store.AvailabilityHead(ctx)
	if err != nil {
		return // lag grows until a probe works: the copy falls back
	}
	c.noteHead(probe{head: head, caughtUp: started.Add(-lag)})
}

// noteHead moves caughtUp when the copy has applied through p's head, or
// queues p until it has.
func (c *Copy) noteHead(p probe) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready {
		return
	}
	if c.applied >= p.head {
		c.caughtUp = later(c.caughtUp, p.caughtUp)
		return
	}
	if len(c.probes) >= 64 { // far behind: the oldest is dropped (lag only looks larger)
		c.probes = c.probes[1:]
	}
	c.probes = append(c.probes, p)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (c *Copy) install(snap domain.AvailabilitySnapshot) {
	locations := make(map[string]int, len(snap.Locations))
	codes := make(map[string]string, len(snap.Locations)) // one string per location code
	for _, l := range snap.Locations {
		locations[l.Code] = l.Priority
		codes[l.Code] = l.Code
	}
	skus := make(map[string]*sku, len(snap.SKUs))
	for _, code := range snap.SKUs {
		skus[code] = &sku{code: code}
	}
	for _, b := range snap.Balances {
		s := skus[b.SKU]
		if s == nil {
			continue // cannot happen in one snapshot
		}
		s.balances = append(s.balances, &balance{location: codes[b.Location], priority: locations[b.Location],
			onHand: int32(b.OnHand), reserved: int32(b.Reserved), committed: int32(b.Committed),
			pending: int32(b.PendingSupply), preordered: int32(b.Preordered),
			updatedAt: b.UpdatedAt.UnixNano(), seq: b.Seq})
	}
	for _, s := range skus {
		slices.SortFunc(s.balances, byPriority)
	}
	c.mu.Lock()
	// An older load than the last one answers nothing until the stream
	// has carried it past what the last one applied (lagLocked).
	c.floor = max(c.floor, c.applied)
	c.skus, c.locations, c.applied = skus, locations, snap.Seq
	c.learnedLocations = map[string]time.Time{}
	c.catalogSKUs, c.catalogMaxID, c.catalogAt = len(snap.SKUs), snap.SKUMaxID, snap.At
	for code := range c.created {
		if skus[code] != nil {
			delete(c.created, code)
		}
	}
	// The snapshot is as old as its transaction's start, not as its
	// install: a load that took longer than MaxLag is stale at once.
	c.caughtUp = time.Time{}
	if !snap.At.IsZero() {
		c.caughtUp = snap.At.Add(-snap.Lag)
	}
	c.ready, c.probes = true, nil
	c.gen++
	c.dirty = map[[2]string]struct{}{}
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func byPriority(a, b *balance) int {
	return cmp.Or(cmp.Compare(a.priority, b.priority), cmp.Compare(a.location, b.location))
}

// apply applies one event; false means a reload is due.
func (c *Copy) apply(e domain.StockEvent) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.Seq != c.applied+1 {
		c.logger.Warn("availability copy: gap in the event stream; reloading", "applied", c.applied, "got", e.Seq)
		return false
	}
	prio, known := c.locations[e.Location]
	if !known {
		return false // a location created since the load: its priority is needed
	}
	s := c.skus[e.SKU]
	if s == nil { // a SKU created since the load
		s = &sku{code: e.SKU}
		c.skus[e.SKU] = s
		delete(c.created, e.SKU)
	}
	var b *balance
	for _, x := range s.balances {
		if x.location == e.Location {
			b = x
			break
		}
	}
	if b == nil {
		b = &balance{location: e.Location, priority: prio}
		s.balances = append(s.balances, b)
		slices.SortFunc(s.balances, byPriority)
	}
	b.onHand, b.reserved, b.committed, b.seq = int32(e.OnHand), int32(e.Reserved), int32(e.Committed), e.Seq
	s.version++
	b.updatedAt = e.At.UnixNano()
	c.applied = e.Seq
	if c.cfg.OnApply != nil {
		c.cfg.OnApply(time.Since(e.At))
	}
	c.dirty[[2]string{e.SKU, e.Location}] = struct{}{}
	signal(c.supply)
	signal(c.appliedSig)
	for len(c.probes) > 0 && c.probes[0].head <= c.applied {
		c.caughtUp = later(c.caughtUp, c.probes[0].caughtUp)
		c.probes = c.probes[1:]
	}
	close(c.changed)
	c.changed = make(chan struct{})
	return true
}

// sink applies the stream to the copy; it never blocks.
type sink struct {
	c      *Copy
	closed chan struct{}
}

func (s *sink) Deliver(_ context.Context, e domain.StockEvent, _ <-chan struct{}, _ func() <-chan time.Time) (domain.Delivery, error) {
	if !s.c.apply(e) {
		signal(s.c.reload)
		return domain.DeliveryCancelled, nil
	}
	return domain.Delivered, nil
}

func (s *sink) Close() { close(s.closed) }
