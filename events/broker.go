// Package events delivers stock events to live subscribers. Each server
// instance runs one Broker: it takes part in the relay that publishes events
// (see store.StockEventsPublish), listens once on PostgreSQL for the relay's
// batched notification, fetches the new events with one query, keeps the
// newest in memory, and fans them out in process. Subscribers read at their
// own pace from that buffer (or, when resuming from further back, from the
// database); one that stops reading is cut off with a reason instead of
// holding anyone up.
package events

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/domain"
)

// Store is what the broker reads and publishes through. store.Store is one.
type Store interface {
	StockEventsRelay(ctx context.Context, limit int, timeout time.Duration) (n int, head domain.StockHead, err error)
	StockEventsAfter(ctx context.Context, after int64, limit int) ([]domain.StockEvent, error)
	StockEventsFetch(ctx context.Context, after int64, limit int) ([]domain.StockEvent, domain.StockHead, error)
	StockEventsLatest(ctx context.Context) (int64, error)
}

// Config tunes the broker; zero values take the defaults.
type Config struct {
	// Tick is how often this instance tries to publish committed events;
	// at most one NOTIFY goes out per tick. Default 25ms: the relay's
	// tick is most of the availability copy's staleness (avail). While
	// another instance's relay publishes, this one stands by (see relay).
	Tick time.Duration
	// Poll fetches new events even without a notification (a lost
	// connection, a missed signal). Default 1s.
	Poll time.Duration
	// Recent is how many of the newest events are kept in memory for
	// subscribers to read. Default 10,000.
	Recent int
	// Buffer is each subscriber's channel capacity. Default 256.
	Buffer int
	// StallTimeout cuts off a subscriber whose buffer stayed full this long.
	// Default 10s.
	StallTimeout time.Duration
	// WaitlistPoll is how often one read finds the waitlistChanged
	// subscriptions whose entries changed without a notification reaching
	// this instance (pollWaitlists). Default domain.WaitlistFeedPoll.
	WaitlistPoll time.Duration
	// RelayTimeout bounds each statement of a relay transaction and each
	// pause between them, in PostgreSQL (see store.StockEventsRelay): an
	// instance frozen while it holds the relay's lock loses it this long
	// after it went idle, and another instance relays. Default 5s.
	RelayTimeout time.Duration
	// MaxStall is how long committed events may wait for the relay before
	// Problem reports the stream as stalled (readiness fails): longer than
	// a frozen relay can hold the lock (2 × RelayTimeout), so that a stall
	// another instance takes over from never turns readiness. Default 30s;
	// negative: never reported.
	MaxStall time.Duration
	// Listen is where the LISTEN connection goes: a session of its own,
	// which a transaction pooler does not keep (the direct URL). Nil: the
	// pool's configuration.
	Listen *pgx.ConnConfig
}

func (c Config) withDefaults() Config {
	if c.Tick <= 0 {
		c.Tick = 25 * time.Millisecond
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	if c.WaitlistPoll <= 0 {
		c.WaitlistPoll = domain.WaitlistFeedPoll
	}
	if c.Recent <= 0 {
		c.Recent = 10_000
	}
	if c.Buffer <= 0 {
		c.Buffer = 256
	}
	if c.StallTimeout <= 0 {
		c.StallTimeout = 10 * time.Second
	}
	if c.RelayTimeout <= 0 {
		c.RelayTimeout = 5 * time.Second
	}
	if c.MaxStall == 0 {
		c.MaxStall = 30 * time.Second
	}
	return c
}

// Broker is one instance's event hub.
type Broker struct {
	store  Store
	pool   *pgxpool.Pool
	cfg    Config
	logger *slog.Logger

	mu      sync.RWMutex
	recent  []domain.StockEvent // contiguous seq, ascending; the newest cfg.Recent are memory (since), up to as many more wait to be trimmed
	last    int64               // newest seq fetched; subscribers without a cursor start here
	wake    chan struct{}       // closed (and replaced) when events arrive
	ready   chan struct{}       // closed once last is known
	stopped chan struct{}       // closed when Run ends: subscriptions end too

	fetch chan struct{} // a notification arrived: fetch now

	subs sync.WaitGroup // running subscriptions
	// subsMu orders Subscribe's subs.Add before Run's close of stopped, so
	// no subscription starts while Run waits for them (a WaitGroup must not
	// grow from zero during Wait): one that arrives while the server shuts
	// down ends at once instead.
	subsMu sync.Mutex

	subscribers atomic.Int64 // live subscriptions, for metrics
	stalledN    atomic.Int64 // subscriptions cut off for not reading
	publishedN  atomic.Int64 // events this instance's relay published
	attemptsN   atomic.Int64 // relay transactions this instance ran
	connects    atomic.Int64 // LISTEN connections made

	// Who relays (see standingBy).
	ownLast    atomic.Int64 // newest seq this instance's relay assigned
	notified   atomic.Int64 // newest seq a notification carried
	notifiedAt atomic.Int64 // when it arrived (UnixNano)

	head atomic.Pointer[domain.StockHead] // see StockHead

	problem atomic.Pointer[string] // why live events are not flowing, nil when they are
	stalled bool                   // the stream was last found stalled (fetchLoop's own)

	waitlist waitlistWatchers // waitlistChanged subscriptions (waitlist.go)
}

// Problem says why this instance cannot serve live events right now (it has
// not started, reading new events fails, or committed events have waited
// longer than MaxStall for the relay), or "" when it can. Readiness reports
// it, so a load balancer sends subscribers elsewhere meanwhile.
//
// It is in words for whoever asks /readyz, which is anyone: never an
// error's text, which names the database's host, port, user and SQL. The
// error itself goes to the log where the problem is found.
func (b *Broker) Problem() string {
	if p := b.problem.Load(); p != nil {
		return *p
	}
	return ""
}

// headReadTimeout bounds one attempt to read the stream's head at start: a
// connection that hangs (a pool slot never freed, a connect the network
// swallowed) fails the attempt, is logged, and the next attempt tries
// again, instead of the instance staying "starting" with nothing in the log.
const headReadTimeout = 5 * time.Second

// readHead is one attempt to read the stream's head, bounded by
// headReadTimeout.
func (b *Broker) readHead(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, headReadTimeout)
	defer cancel()
	return b.store.StockEventsLatest(ctx)
}

// The problems Problem reports, besides a stall (see checkStall).
const (
	problemStarting  = "live events unavailable: starting"
	problemNoHead    = "live events unavailable: cannot read the event stream's head from the database"
	problemNoFetch   = "live events unavailable: cannot read new events from the database"
	problemStalledAt = "live events stalled: stock changes have waited %s to be published (bound %s)"
)

func (b *Broker) setProblem(msg string) {
	if msg == "" {
		b.problem.Store(nil)
		return
	}
	b.problem.Store(&msg)
}

// Subscribers is the number of live subscriptions.
func (b *Broker) Subscribers() int { return int(b.subscribers.Load()) }

// Stalled is how many subscriptions were cut off for not reading.
func (b *Broker) Stalled() int64 { return b.stalledN.Load() }

// Published is how many events this instance's relay published.
func (b *Broker) Published() int64 { return b.publishedN.Load() }

// StockHead is the head as this instance last saw it, by a fetch of new
// events or a relay transaction that published every waiting event (false
// before the first): what a reader that keeps up with the stream needs to
// know how stale it is, without a query of its own.
func (b *Broker) StockHead() (domain.StockHead, bool) {
	if h := b.head.Load(); h != nil {
		return *h, true
	}
	return domain.StockHead{}, false
}

// RelayAttempts is how many relay transactions this instance ran, whether
// or not they published anything.
func (b *Broker) RelayAttempts() int64 { return b.attemptsN.Load() }

// ListenGeneration counts how often the LISTEN connection was made again
// after the first: notifications sent while it was down were lost, and
// events waited for the next Poll. A reader that must not lag that long
// (the availability copy) reloads when it changes.
func (b *Broker) ListenGeneration() int64 { return max(b.connects.Load()-1, 0) }

// NewBroker returns a broker; Run starts it.
func NewBroker(st Store, pool *pgxpool.Pool, cfg Config, logger *slog.Logger) *Broker {
	return &Broker{store: st, pool: pool, cfg: cfg.withDefaults(), logger: logger,
		wake: make(chan struct{}), ready: make(chan struct{}), stopped: make(chan struct{}), fetch: make(chan struct{}, 1)}
}

// Run publishes, listens and fetches until ctx ends, then ends every
// subscription and waits for their goroutines. If it cannot start (the
// database does not answer) it says so at ERROR, reports the Problem, and
// tries again with backoff; subscriptions made meanwhile wait for it.
func (b *Broker) Run(ctx context.Context) error {
	b.setProblem(problemStarting)
	var last int64
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		var err error
		if last, err = b.readHead(ctx); err == nil {
			break
		}
		if ctx.Err() != nil {
			close(b.stopped)
			return nil // stopped while starting
		}
		b.setProblem(problemNoHead)
		b.logger.ErrorContext(ctx, "events: cannot start; retrying", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			close(b.stopped)
			return nil
		case <-time.After(backoff):
		}
	}
	b.setProblem("")
	b.mu.Lock()
	b.last = last
	b.mu.Unlock()
	close(b.ready)

	var wg sync.WaitGroup
	wg.Go(func() { b.relay(ctx) })
	wg.Go(func() { b.listen(ctx) })
	wg.Go(func() { b.pollWaitlists(ctx) })
	b.fetchLoop(ctx)
	wg.Wait()

	b.subsMu.Lock()
	close(b.stopped)
	b.subsMu.Unlock()
	b.waitlist.stop()
	b.subs.Wait()
	return nil
}
