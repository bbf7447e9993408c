// Package avail keeps an in-memory copy of every balance, in step with the
// stock event stream, so availability (a storefront's hot read) is answered
// without a database round trip.
//
// The copy loads every balance, SKU and location in one snapshot, then
// applies the broker's gap-free event stream in seq order from the
// snapshot's seq. Each event carries the balance's on hand, reserved and committed
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
	committed                             int32
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
	// is every anonymous page view's work, and allocation is most of it.
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
				OnHand: int(b.onHand), Reserved: int(b.reserved), Committed: int(b.committed),
				PendingSupply: int(b.pending), Preordered: int(b.preordered),
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
