// Package avail keeps an in-memory copy of every balance, in step with the
// stock event stream, so availability (a storefront's hot read) is answered
// without a database round trip.
//
// The copy loads every balance, SKU and location in one snapshot, then
// applies the broker's gap-free event stream in seq order from the
// snapshot's seq. Each event carries the balance's on hand and reserved
// after the change; pending supply and pre-ordered counts (which events do
// not carry) are read back from the database for the balances a batch of
// events touched, off the read path. A gap, the end of the subscription
// (the broker stopping or cutting it off), a lost LISTEN connection, or an
// event naming a location the copy does not know make it reload; meanwhile
// (and whenever it is staler than MaxLag) Get says so and the caller reads
// the database.
//
// Staleness is measured, not assumed: every ProbeInterval the copy reads the
// newest published seq and how long the oldest committed, unpublished event
// has waited; once it has applied through that seq, it is known to hold
// every change committed before that wait began. A load counts from its
// snapshot's start, not from its install, and a load older than what the
// copy had applied before (a lagging standby) answers nothing until the
// stream has carried it past that: an instance's answers never go back.
//
// Creating a SKU makes no stock event, so the copy knows how fresh its
// catalog is (as of its load, then of each catalog check): a code it does
// not know while that is within MaxLag is answered null. Queries naming
// unknown codes ask for a check in the background, at most once per
// CatalogInterval, which costs a count of the SKUs unless some were
// created; never a read per query.
package avail

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"inventory/domain"
)

// Store is what the copy reads. store.Store is one.
type Store interface {
	AvailabilitySnapshot(ctx context.Context) (domain.AvailabilitySnapshot, error)
	AvailabilityCatalogSince(ctx context.Context, knownSKUs int, afterID int64) (domain.CatalogChange, error)
	AvailabilityHead(ctx context.Context) (seq int64, lag time.Duration, err error)
	AvailabilitySupply(ctx context.Context, skus, locations []string) ([]domain.Balance, error)
}

// Stream is the live event stream the copy follows, and how it learns that
// the stream's LISTEN connection was re-established (events may then have
// waited for the next poll). events.Broker is one.
type Stream interface {
	// FollowStockEvents is domain.StockEventStream's SubscribeStockEvents,
	// not counted as a live subscription.
	FollowStockEvents(ctx context.Context, after *int64, sink domain.StockEventSink, done func(error))
	ListenGeneration() int64
	// StockHead is the head as the stream's newest fetch saw it: after
	// applying what that fetch delivered, the copy knows its staleness
	// without a query.
	StockHead() (domain.StockHead, bool)
}

// Config tunes the copy; zero values take the defaults.
type Config struct {
	// MaxLag is how stale the copy may be and still answer. Default 1s.
	MaxLag time.Duration
	// ProbeInterval is how often staleness is measured (one short query).
	// Default MaxLag/10, at most 20ms: between two probes the measured
	// staleness can only grow, so the interval adds up to itself to it.
	ProbeInterval time.Duration
	// CatalogInterval is the least time between two catalog checks
	// (store.AvailabilityCatalogSince: a count of the SKUs, about 10ms of
	// the primary at 100,000 SKUs, and the codes of new ones), made only
	// while queries name SKUs or locations the copy does not know. Default
	// MaxLag/2, at least 250ms: under a steady stream of unknown codes the
	// catalog then stays within MaxLag, so none is left to the database.
	CatalogInterval time.Duration
	// OnApply, if set, is told how long each applied event took from its
	// transaction to the copy (for the lag histogram).
	OnApply func(time.Duration)
}

func (c Config) withDefaults() Config {
	if c.MaxLag <= 0 {
		c.MaxLag = time.Second
	}
	if c.ProbeInterval <= 0 {
		c.ProbeInterval = min(c.MaxLag/10, 20*time.Millisecond)
	}
	if c.CatalogInterval <= 0 {
		c.CatalogInterval = max(c.MaxLag/2, 250*time.Millisecond)
	}
	return c
}

// balance is one balance in the copy. Location codes are shared with the
// location map, so a balance costs its numbers and two words.
type balance struct {
	location                              string
	priority                              int
	onHand, reserved, pending, preordered int32
	updatedAt                             int64 // unix nanoseconds
	seq                                   int64
}

// sku is one SKU's balances in sourcing order (priority, then code).
type sku struct {
	code     string
	balances []*balance
	// learned is when a catalog read that found this SKU ended (zero
	// when it came with the load or an event): until the copy has caught
	// up past it, the SKU's balances (changes committed before that read)
	// may not have reached the copy yet, and the database answers for it.
	learned time.Time
	// version counts changes to any of its balances (events and supply
	// read-backs): a cached answer that read it at another version is stale.
	version uint64
}

type probe struct {
	head     int64
	caughtUp time.Time // every change committed before this is in the copy once head is applied
}

// Copy is one instance's in-memory availability. Run keeps it in step; Get
// answers from it.
type Copy struct {
	store  Store
	stream Stream
	cfg    Config
	logger *slog.Logger

	mu               sync.RWMutex
	ready            bool // loaded and following the stream
	skus             map[string]*sku
	locations        map[string]int       // priority by code
	learnedLocations map[string]time.Time // as sku.learned, for locations a catalog read found
	// Every SKU committed before catalogAt is in skus (zero: not known, as
	// after a standby's load), so a code not in skus while catalogAt is
	// within MaxLag is answered null: it did not exist MaxLag ago, which
	// is as stale as any answer may be. catalogSKUs and catalogMaxID are
	// the count and newest id the last load or check saw.
	catalogAt    time.Time
	catalogSKUs  int
	catalogMaxID int64
	// created are SKUs this instance created that the copy does not know
	// yet: the database answers them (see createdSKU).
	created map[string]struct{}
	applied int64 // newest seq applied
	// floor is the newest seq applied by an earlier load: what this
	// instance may already have answered. A load can be older (a standby
	// that lags), and until the stream has carried the copy back to floor
	// it does not answer, so no caller sees a balance or X-Stock-Seq go
	// backwards.
	floor    int64
	caughtUp time.Time // see probe; zero: not known (every answer waits for a probe)
	probes   []probe   // measured heads not yet applied, ascending
	dirty    map[[2]string]struct{}
	changed  chan struct{} // closed (and replaced) whenever a balance changes

	reload     chan struct{} // a gap, an unknown location, a reconnect
	appliedSig chan struct{} // events were applied: measure now, the head they reached is likely the newest
	catalog    chan struct{} // a query named an unknown code while the catalog was not known fresh
	supply     chan struct{} // dirty balances wait for their supply figures

	gen       int64 // loads installed, under mu: a supply read from before a load is dropped
	reloads   atomic.Int64
	fallbacks atomic.Int64
	hits      atomic.Int64
}

// New returns a copy; Run loads and follows the stream.
func New(st Store, stream Stream, cfg Config, logger *slog.Logger) *Copy {
	return &Copy{store: st, stream: stream, cfg: cfg.withDefaults(), logger: logger,
		changed: make(chan struct{}), dirty: map[[2]string]struct{}{}, created: map[string]struct{}{},
		reload: make(chan struct{}, 1), appliedSig: make(chan struct{}, 1), catalog: make(chan struct{}, 1), supply: make(chan struct{}, 1)}
}

// MaxLag is the configured bound on staleness.
func (c *Copy) MaxLag() time.Duration { return c.cfg.MaxLag }

// Lag is how stale the copy is now: the time since the newest moment before
// which every committed change is known to be applied. It is an hour while
// the copy is not loaded, while that moment is not known yet (a load from
// a standby, until a probe), and while a load older than what the copy
// already answered has not caught up.
func (c *Copy) Lag() time.Duration {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.lagLocked()
}

func (c *Copy) lagLocked() time.Duration {
	if !c.ready || c.caughtUp.IsZero() || c.applied < c.floor {
		return time.Hour
	}
	return min(max(time.Since(c.caughtUp), 0), time.Hour)
}

// Seq is the newest stock event seq applied.
func (c *Copy) Seq() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.applied
}

// Reloads, Hits and Fallbacks count full loads, queries answered from the
// copy and queries it could not answer (stale, loading, or an unknown code).
func (c *Copy) Reloads() int64   { return c.reloads.Load() }
func (c *Copy) Hits() int64      { return c.hits.Load() }
func (c *Copy) Fallbacks() int64 { return c.fallbacks.Load() }

// Changed returns a channel closed at the next change to any balance (or
// reload): a subscriber waits on it, then calls Get again.
func (c *Copy) Changed() <-chan struct{} {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.changed
}

// Get answers q from the copy, in request order with nil for unknown SKUs
// (the store's AvailabilityList semantics), with the highest seq among the
// balances answered. ok is false when the copy cannot answer: not loaded,
// staler than MaxLag, q names a location it does not know (the database
// then says it is unknown), or q names a SKU it does not know and it has
// not checked the catalog within MaxLag; the caller reads the database
// instead. A query naming unknown codes makes the copy check the catalog
// in the background (at most once per CatalogInterval, whatever the
// queries), soon enough that it keeps answering them: a SKU it does not
// know is then one that did not exist MaxLag ago, and answered null.
// q must be valid (q.Validate).
func (c *Copy) Get(q domain.AvailabilityQuery) (out []*domain.Availability, seq int64, ok bool) {
	out, seq, _, ok = c.get(q, false)
	return out, seq, ok
}

// GetWithDeps is Get that also says what the answer depends on: with
// Unchanged, a cache of the answer (serialized) knows when it goes stale.
func (c *Copy) GetWithDeps(q domain.AvailabilityQuery) (out []*domain.Availability, seq int64, deps []domain.AnswerDep, ok bool) {
	return c.get(q, true)
}

// Unchanged says whether answers read at deps would be answered the same
// now: the copy is still the same load, within MaxLag, none of those SKUs'
// balances changed, and those answered null are still unknown to a
// catalog checked within MaxLag.
func (c *Copy) Unchanged(deps []domain.AnswerDep) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.ready || c.lagLocked() > c.cfg.MaxLag {
		return false
	}
	for _, d := range deps {
		s := c.skus[d.SKU]
		if d.Load != c.gen {
			return false
		}
		if d.Absent {
			// A cached null keeps the catalog checked, as a query would.
			c.wantCatalogLocked()
			if s != nil || !c.catalogFreshLocked() {
				return false
			}
			continue
		}
		if s == nil || s.version != d.Version {
			return false
		}
	}
	return true
}

// catalogFreshLocked says whether the copy knows every SKU committed
// MaxLag ago, so that one it does not know may be answered null.
func (c *Copy) catalogFreshLocked() bool {
	return !c.catalogAt.IsZero() && time.Since(c.catalogAt) <= c.cfg.MaxLag
}

func (c *Copy) get(q domain.AvailabilityQuery, withDeps bool) (out []*domain.Availability, seq int64, deps []domain.AnswerDep, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.ready || c.lagLocked() > c.cfg.MaxLag {
		c.fallbacks.Add(1)
		return nil, 0, nil, false
	}
	var filter map[string]bool
	if q.Locations != nil {
		filter = make(map[string]bool, len(q.Locations))
		for _, l := range q.Locations {
			if _, known := c.locations[l]; !known {
				// The database says which is unknown (an error, not a
				// null); the check lets the copy answer a new one.
				c.fallbacks.Add(1)
				c.wantCatalogLocked()
				return nil, 0, nil, false
			}
			if at, learned := c.learnedLocations[l]; learned && c.caughtUp.Before(at) {
				c.fallbacks.Add(1)
				return nil, 0, nil, false
			}
			filter[l] = true
		}
	}
	// One allocation for the entries and one for all their balances: this
	// is every anonymous page view's work, and allocation was most of it.
	found := make([]*sku, len(q.SKUs))
	nBalances := 0
	askedCatalog := false
	for i, code := range q.SKUs {
		s := c.skus[code]
		if s == nil {
			// Answered null if it did not exist MaxLag ago; either way
			// the catalog is checked soon, so the next query finds it
			// fresh: a stream of unknown codes costs one check per
			// CatalogInterval, not a read each.
			if !askedCatalog {
				c.wantCatalogLocked()
				askedCatalog = true
			}
			if _, created := c.created[code]; created || !c.catalogFreshLocked() {
				c.fallbacks.Add(1)
				return nil, 0, nil, false
			}
			continue
		}
		if !s.learned.IsZero() && c.caughtUp.Before(s.learned) {
			c.fallbacks.Add(1)
			return nil, 0, nil, false
		}
		found[i] = s
		nBalances += len(s.balances)
	}
	if withDeps {
		deps = make([]domain.AnswerDep, 0, len(q.SKUs))
	}
	entries := make([]domain.Availability, len(q.SKUs))
	balances := make([]domain.Balance, 0, nBalances)
	out = make([]*domain.Availability, len(q.SKUs))
	for i, s := range found {
		if s == nil { // unknown: null
			if withDeps { // a repeat adds a dep again: harmless
				deps = append(deps, domain.AnswerDep{SKU: q.SKUs[i], Absent: true, Load: c.gen})
			}
			continue
		}
		if j := slices.Index(found[:i], s); j >= 0 {
			// A repeat: its own copy, so no caller sees two entries alias.
			entries[i] = *out[j]
			entries[i].Locations = slices.Clone(out[j].Locations)
			out[i] = &entries[i]
			continue
		}
		if withDeps {
			deps = append(deps, domain.AnswerDep{SKU: s.code, Version: s.version, Load: c.gen})
		}
		a := &entries[i]
		a.SKU = s.code
		start := len(balances)
		for _, b := range s.balances {
			if filter != nil && !filter[b.location] {
				continue
			}
			balances = append(balances, domain.Balance{SKU: s.code, Location: b.location,
				OnHand: int(b.onHand), Reserved: int(b.reserved), PendingSupply: int(b.pending), Preordered: int(b.preordered),
				UpdatedAt: time.Unix(0, b.updatedAt)}) // local, as pgx gives the database path
			seq = max(seq, b.seq)
		}
		// Capped, so an append by the caller cannot write into the next entry's.
		a.Locations = balances[start:len(balances):len(balances)]
		out[i] = a
	}
	c.hits.Add(1)
	return out, seq, deps, true
}

// wantCatalogLocked asks for a catalog check when the last one is older
// than CatalogInterval (at most half of MaxLag) or not known: a steady
// stream of queries naming unknown codes keeps the catalog fresh, so none
// of them is left to the database and a SKU created meanwhile is found
// within about CatalogInterval, with one check per CatalogInterval at most.
func (c *Copy) wantCatalogLocked() {
	if c.catalogAt.IsZero() || time.Since(c.catalogAt) > c.recheck() {
		signal(c.catalog)
	}
}

// recheck is how old a catalog check may be before a query naming an
// unknown code asks for another.
func (c *Copy) recheck() time.Duration { return min(c.cfg.CatalogInterval, c.cfg.MaxLag/2) }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

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
				// A head the stream read within two probe intervals (at
				// idle: this instance's relay, every tick) is as good as
				// a probe, and costs no query.
				if h, ok := c.stream.StockHead(); ok && time.Since(h.At) < 2*c.cfg.ProbeInterval {
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
			onHand: int32(b.OnHand), reserved: int32(b.Reserved), pending: int32(b.PendingSupply), preordered: int32(b.Preordered),
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
	b.onHand, b.reserved, b.seq = int32(e.OnHand), int32(e.Reserved), e.Seq
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

// maintain reads supply figures for dirty balances, and checks the catalog
// when queries name unknown codes, at most once per CatalogInterval.
func (c *Copy) maintain(ctx context.Context) {
	var lastCatalog time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.supply:
			c.readSupply(ctx)
		case <-c.catalog:
			if wait := c.cfg.CatalogInterval - time.Since(lastCatalog); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
			lastCatalog = time.Now()
			c.checkCatalog(ctx)
		}
	}
}

func (c *Copy) readSupply(ctx context.Context) {
	c.mu.Lock()
	if len(c.dirty) == 0 {
		c.mu.Unlock()
		return
	}
	skus := make([]string, 0, len(c.dirty))
	locs := make([]string, 0, len(c.dirty))
	for k := range c.dirty {
		skus, locs = append(skus, k[0]), append(locs, k[1])
	}
	c.dirty = map[[2]string]struct{}{}
	gen := c.gen
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := c.store.AvailabilitySupply(ctx, skus, locs)
	if err != nil {
		if ctx.Err() == nil {
			c.logger.Warn("availability copy: reading supply failed; reloading", "err", err)
		}
		signal(c.reload)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return // a load since: it holds newer figures
	}
	changed := false
	for _, g := range got {
		s := c.skus[g.SKU]
		if s == nil {
			continue
		}
		for _, b := range s.balances {
			if b.location == g.Location {
				if b.pending != int32(g.PendingSupply) || b.preordered != int32(g.Preordered) || g.UpdatedAt.UnixNano() > b.updatedAt {
					changed = true
					s.version++
				}
				b.pending, b.preordered = int32(g.PendingSupply), int32(g.Preordered)
				b.updatedAt = max(b.updatedAt, g.UpdatedAt.UnixNano())
			}
		}
	}
	if changed {
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// checkCatalog learns the SKUs and locations created since the copy's
// load or last check. The database work is a count unless something was
// created (store.AvailabilityCatalogSince); the write lock is held to add
// what is new, never to compare the whole catalog (the rare full read is
// compared under the read lock, which queries share).
func (c *Copy) checkCatalog(ctx context.Context) {
	c.mu.RLock()
	ready, gen, known, after := c.ready, c.gen, c.catalogSKUs, c.catalogMaxID
	fresh := !c.catalogAt.IsZero() && time.Since(c.catalogAt) <= c.recheck()
	c.mu.RUnlock()
	if !ready || fresh { // a load or a check since it was asked for
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ch, err := c.store.AvailabilityCatalogSince(ctx, known, after)
	if err != nil {
		if ctx.Err() == nil {
			c.logger.Warn("availability copy: checking the catalog failed; unknown codes are answered by the database", "err", err)
		}
		return
	}
	// A SKU found here may have balances whose events the copy has not
	// applied yet: it is answered by the database until the copy has
	// caught up past this read (sku.learned), an upper bound on its
	// snapshot.
	read := time.Now()
	added := ch.New
	if ch.Full {
		added = nil
		c.mu.RLock()
		for _, code := range ch.New {
			if c.skus[code] == nil {
				added = append(added, code)
			}
		}
		c.mu.RUnlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready || c.gen != gen {
		return // a load since: its own catalog is what counts
	}
	for _, l := range ch.Locations {
		if _, known := c.locations[l.Code]; !known {
			c.locations[l.Code] = l.Priority
			c.learnedLocations[l.Code] = read
		}
	}
	for _, code := range added {
		if c.skus[code] == nil {
			c.skus[code] = &sku{code: code, learned: read}
		}
		delete(c.created, code)
	}
	c.catalogSKUs, c.catalogMaxID = ch.SKUs, ch.MaxID
	c.catalogAt = later(c.catalogAt, ch.At)
}

// createdSKU notes a SKU this instance has just created (its transaction
// has committed): until the copy knows it (from its first event, or a
// catalog check), the database answers it, never the copy's null. It is
// not added to the copy here: its first receipt may commit right after,
// and the copy would then answer it as empty, within its bound but not
// what the caller who just created and stocked it expects from the
// instance it used.
func (c *Copy) createdSKU(code string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.skus[code] == nil {
		c.created[code] = struct{}{}
	}
}

// learnLocation adds a location this instance has just created, as
// learnSKU a SKU (its first balance's event then needs no reload).
func (c *Copy) learnLocation(code string, priority int) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, known := c.locations[code]; c.ready && !known {
		c.locations[code] = priority
		c.learnedLocations[code] = now
	}
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
