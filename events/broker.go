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
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgxlisten"

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
	recent  []domain.StockEvent // contiguous seq, ascending, at most cfg.Recent
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
		if last, err = b.store.StockEventsLatest(ctx); err == nil {
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

// stepTimeout bounds one publish or fetch, waiting for a connection of the
// events pool included, so a stuck step fails (and is retried, and reported
// by readiness) instead of stopping live events silently.
const stepTimeout = 10 * time.Second

func (b *Broker) publishOnce(ctx context.Context, limit int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	b.attemptsN.Add(1)
	n, head, err := b.store.StockEventsRelay(ctx, limit, b.cfg.RelayTimeout)
	if n > 0 {
		b.ownLast.Store(head.Seq)
	}
	if !head.CaughtUp.IsZero() {
		// A relay transaction that took every waiting event knows the head
		// as well as a fetch: at idle, when nothing is fetched, it keeps
		// the availability copy's staleness known without a probe.
		b.head.Store(&head)
	}
	return n, err
}

// standByTicks is how many ticks after another instance's newest
// notification this one stands by: a few, so that a notification delayed on
// a busy machine or a tick of the relaying instance that found nothing new
// does not bring every instance back at once.
const standByTicks = 4

// standingBy says whether another instance is relaying: the newest
// notification came within standByTicks ticks and carried a seq this
// instance did not assign. Then this tick is skipped. Every instance trying
// every tick cost each of them a transaction per tick (three instances ran
// 1,015 relay transactions in 8 s to publish in 366); with this one
// instance relays while it keeps publishing, and the others take over
// within standByTicks ticks of its last notification when it stops
// (killed or cut off; or simply idle: with nothing to publish nobody
// notifies, see below). Who relays never matters for correctness: the
// store's advisory lock orders relay transactions whoever runs them.
//
// At idle the instance that published last keeps trying every tick, and
// the others every idleTicks ticks: an idle instance cost the primary 40
// transactions a second, N of them 40N. The price is when that instance
// is gone and the first change after a quiet spell waits up to idleTicks
// ticks (200 ms by default) for another to publish it.
func (b *Broker) standingBy(now time.Time, tick int64) bool {
	if b.notified.Load() <= b.ownLast.Load() {
		return false // this instance published the newest: it relays
	}
	if now.UnixNano()-b.notifiedAt.Load() < int64(standByTicks*b.cfg.Tick) {
		return true // another instance is relaying
	}
	return tick%idleTicks != 0
}

// idleTicks is how often, in ticks, an instance that did not publish last
// tries while nobody publishes.
const idleTicks = 8

// relay publishes committed events every tick, unless another instance's
// relay is publishing them (standingBy). The store's advisory lock lets one
// at a time do it.
func (b *Broker) relay(ctx context.Context) {
	t := time.NewTicker(b.cfg.Tick)
	defer t.Stop()
	failing := false
	for tick := int64(0); ; tick++ {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if b.standingBy(now, tick) {
				continue
			}
		}
		const batch = 5000
		for {
			n, err := b.publishOnce(ctx, batch)
			b.publishedN.Add(int64(n))
			if ctx.Err() != nil {
				return
			}
			// Said once when publishing starts failing (not every tick),
			// and once when it works again.
			switch {
			case err != nil && !failing:
				b.logger.ErrorContext(ctx, "events: publish failing; retrying every tick", "err", err)
			case err == nil && failing:
				b.logger.InfoContext(ctx, "events: publishing again")
			}
			failing = err != nil
			if n < batch {
				break
			}
		}
	}
}

// listen waits for the relay's notifications on a connection of its own.
func (b *Broker) listen(ctx context.Context) {
	l := &pgxlisten.Listener{
		Connect: func(ctx context.Context) (*pgx.Conn, error) {
			b.connects.Add(1)
			if b.cfg.Listen != nil {
				return pgx.ConnectConfig(ctx, b.cfg.Listen.Copy())
			}
			return pgx.ConnectConfig(ctx, b.pool.Config().ConnConfig.Copy())
		},
		LogError: func(ctx context.Context, err error) {
			if ctx.Err() == nil {
				b.logger.WarnContext(ctx, "events: listen", "err", err)
			}
		},
		ReconnectDelay: time.Second,
	}
	l.Handle(domain.StockEventsChannel, pgxlisten.HandlerFunc(func(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
		if seq, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
			b.notified.Store(seq)
			b.notifiedAt.Store(time.Now().UnixNano())
		}
		select {
		case b.fetch <- struct{}{}:
		default: // a fetch is already due
		}
		return nil
	}))
	l.Handle(domain.WaitlistChannel, &b.waitlist)
	_ = l.Listen(ctx) // returns ctx.Err() when ctx ends
}

// fetchLoop reads newly published events into memory and wakes subscribers,
// on each notification and every Poll.
func (b *Broker) fetchLoop(ctx context.Context) {
	t := time.NewTicker(b.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.fetch:
		case <-t.C:
		}
		fetchCtx, cancel := context.WithTimeout(ctx, stepTimeout)
		err := b.fetchNew(fetchCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			b.logger.ErrorContext(ctx, "events: fetch", "err", err)
			b.setProblem(problemNoFetch) // cleared by the next fetch that works (every Poll at most)
			continue
		}
		b.setProblem(b.checkStall(ctx, time.Now()))
	}
}

// checkStall returns the Problem of a stream that has stopped moving while
// events wait: committed events have waited longer than MaxStall for the
// relay, by the head the last fetch read (its CaughtUp is how far back
// every committed change was published, so it grows old only while events
// wait). A relay instance that froze inside its transaction is cut off
// within 2 × RelayTimeout and another takes over, so past MaxStall the
// relay is stuck everywhere (a lock held by something the bound does not
// cover, the relay failing on every instance): every instance reports it,
// and the stall is logged once when it begins and once when it ends.
func (b *Broker) checkStall(ctx context.Context, now time.Time) string {
	head, ok := b.StockHead()
	if !ok || head.CaughtUp.IsZero() || b.cfg.MaxStall < 0 {
		return ""
	}
	waited := now.Sub(head.CaughtUp)
	stalled := waited > b.cfg.MaxStall
	switch {
	case stalled && !b.stalled:
		b.logger.ErrorContext(ctx, "events: the stream is stalled: committed events wait for the relay; readiness fails until it moves",
			"waited", waited.Round(time.Millisecond), "max_stall", b.cfg.MaxStall, "head_seq", head.Seq)
	case !stalled && b.stalled:
		b.logger.InfoContext(ctx, "events: the stream moves again", "head_seq", head.Seq)
	}
	b.stalled = stalled
	if !stalled {
		return ""
	}
	return fmt.Sprintf(problemStalledAt, waited.Round(time.Second), b.cfg.MaxStall)
}

func (b *Broker) fetchNew(ctx context.Context) error {
	for {
		b.mu.RLock()
		after := b.last
		b.mu.RUnlock()
		events, head, err := b.store.StockEventsFetch(ctx, after, domain.MaxStockEventsPage)
		if err != nil {
			return err
		}
		// Stored before the events are: whoever applies them and then asks
		// for the head gets one at least as new.
		b.head.Store(&head)
		if len(events) == 0 {
			return nil
		}
		b.mu.Lock()
		b.recent = append(b.recent, events...)
		if extra := len(b.recent) - b.cfg.Recent; extra > 0 {
			b.recent = append(b.recent[:0:0], b.recent[extra:]...)
		}
		b.last = events[len(events)-1].Seq
		close(b.wake)
		b.wake = make(chan struct{})
		b.mu.Unlock()
		if len(events) < domain.MaxStockEventsPage {
			return nil
		}
	}
}

// since returns up to max in-memory events after cursor, whether memory
// reaches back that far, and the channel closed at the next arrival.
func (b *Broker) since(cursor int64, max int) ([]domain.StockEvent, bool, <-chan struct{}) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if cursor >= b.last {
		return nil, true, b.wake
	}
	if len(b.recent) == 0 || b.recent[0].Seq > cursor+1 {
		return nil, false, b.wake
	}
	i := int(cursor + 1 - b.recent[0].Seq)
	end := min(i+max, len(b.recent))
	// Shared, not copied (every subscriber reads every batch): an element
	// of recent is never written once appended; fetchNew appends past the
	// length (which no reader's slice reaches: capped here) and trims into
	// a new array.
	return b.recent[i:end:end], true, b.wake
}

var _ domain.StockEventStream = (*Broker)(nil)

// SubscribeStockEvents implements domain.StockEventStream: a subscriber
// whose sink stays full for StallTimeout ends with
// *domain.ErrSubscriberStalled, and every subscription ends with
// *domain.ErrStreamStopped when Run ends.
func (b *Broker) SubscribeStockEvents(ctx context.Context, after *int64, sink domain.StockEventSink, done func(error)) {
	b.subscribe(ctx, after, sink, done, true)
}

// FollowStockEvents is SubscribeStockEvents for a reader inside this
// instance (the availability copy): the same stream, not counted among the
// live subscriptions that /metrics reports.
func (b *Broker) FollowStockEvents(ctx context.Context, after *int64, sink domain.StockEventSink, done func(error)) {
	b.subscribe(ctx, after, sink, done, false)
}

func (b *Broker) subscribe(ctx context.Context, after *int64, sink domain.StockEventSink, done func(error), counted bool) {
	b.subsMu.Lock()
	defer b.subsMu.Unlock()
	select {
	case <-b.stopped:
		// Shutting down: the stream ends at once, saying where to resume.
		stopped := &domain.ErrStreamStopped{}
		if after != nil {
			stopped.Next = *after + 1
		}
		done(stopped)
		sink.Close()
		return
	default:
	}
	b.subs.Add(1)
	if counted {
		b.subscribers.Add(1)
	}
	go func() {
		defer b.subs.Done()
		if counted {
			defer b.subscribers.Add(-1)
		}
		defer sink.Close()
		err := b.stream(ctx, after, sink)
		var stalled *domain.ErrSubscriberStalled
		if errors.As(err, &stalled) {
			b.stalledN.Add(1)
		}
		done(err)
	}()
}

// SubscriberBuffer is the configured capacity of a subscriber's channel:
// its bounded buffer.
func (b *Broker) SubscriberBuffer() int { return b.cfg.Buffer }

func (b *Broker) stream(ctx context.Context, after *int64, sink domain.StockEventSink) error {
	select {
	case <-b.ready:
	case <-ctx.Done():
		return nil
	case <-b.stopped:
		if after != nil {
			return &domain.ErrStreamStopped{Next: *after + 1}
		}
		return &domain.ErrStreamStopped{}
	}
	var cursor int64
	if after != nil {
		cursor = *after
	} else {
		b.mu.RLock()
		cursor = b.last
		b.mu.RUnlock()
	}
	stall := time.NewTimer(b.cfg.StallTimeout)
	defer stall.Stop()
	// A full subscriber gets StallTimeout from the moment it is found full.
	stallWait := func() <-chan time.Time {
		stall.Reset(b.cfg.StallTimeout)
		return stall.C
	}
	for {
		events, inMemory, wake := b.since(cursor, 256)
		if !inMemory {
			// Resuming from before what memory holds: read the database.
			var err error
			if events, err = b.store.StockEventsAfter(ctx, cursor, domain.MaxStockEventsPage); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		if len(events) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-b.stopped:
				return &domain.ErrStreamStopped{Next: cursor + 1}
			case <-wake:
				continue
			}
		}
		for _, e := range events {
			delivery, err := sink.Deliver(ctx, e, b.stopped, stallWait)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			switch delivery {
			case domain.DeliveryCancelled:
				return nil
			case domain.DeliveryStopped:
				return &domain.ErrStreamStopped{Next: e.Seq}
			case domain.DeliveryStalled:
				return &domain.ErrSubscriberStalled{Next: e.Seq, Timeout: b.cfg.StallTimeout}
			}
			cursor = e.Seq
		}
	}
}
