package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"inventory/domain"
)

// coalescer gathers concurrent requests of one kind so that one transaction
// serves many of them. reserveCoalescer batches single-line reserves: on a
// hot balance every reserve otherwise waits for the previous one's row lock
// and commit, so throughput falls as buyers are added; in a batch the balance
// row is locked and updated once for all of them, and the holds, lines,
// ledger rows, events and expiry jobs are written set-based (see
// reserveBatch). confirmCoalescer batches confirms (see confirmBatch): each
// otherwise pays a transaction, a commit and its round trips of its own.
//
// A request queues; a leader, a goroutine, takes up to maxBatch queued
// requests, runs them as one batch, and repeats until the queue is empty.
// While batches keep up, the requests that arrive during a batch wait until
// it sends its last round trip and then form the next one (handoff), so
// under load batches grow, each reserve shares one transaction, one commit
// and one expiry insert with many (group commit), and the next batch's
// first round trips overlap the last one's commit. A second and further leaders, up to maxLeaders,
// start only for a request that has waited in the queue for spreadAfter (a
// batch behind a locked row, or one that cannot keep up): no request stays
// queued longer than about spreadAfter while fewer than maxLeaders batches
// run. A leader that finishes a batch while another leader runs retires, so
// the extra leaders last as long as the stall. (Starting a leader for every
// arrival while fewer than maxLeaders run would keep that many small
// batches going at once: fewer reserves per transaction, and more of
// PostgreSQL's CPU per reserve.) The request itself only waits, and
// stops waiting when its context ends (INVENTORY_REQUEST_TIMEOUT, or the
// client going away), so a batch stuck behind a hot row lock never holds a
// request past its deadline:
//
//   - still queued, it leaves the queue: nothing of it was written;
//   - already in a running batch, the batch may still decide it (a retry
//     with the same requestKey, or orderRef, then answers what it decided);
//     when every request of a batch has given up, the batch's context is
//     cancelled and its transaction rolls back, so nothing of it remains.
//
// A batch runs on a context of its own, bounded by timeout, not on any one
// request's: one request giving up must not fail the others. A panic in a
// batch is recovered: logged with its stack, its requests fail (INTERNAL),
// and the leader goes on, so the slot is never lost.
type coalescer[T interface{ turnOf() *batchTurn }] struct {
	name                 string // for logs
	maxLeaders, maxBatch int
	spreadAfter          time.Duration              // queue wait after which a request starts a further leader
	timeout              time.Duration              // longest a batch may run
	run                  func(context.Context, []T) // fills each request's outcome
	logger               func() *slog.Logger
	panicked             func()              // counts a batch that panicked (its run recorded nothing); may be nil
	tracer               func() trace.Tracer // the batches' and waits' spans (batch_tracing.go); nil: none

	mu      sync.Mutex
	queue   []T // not yet taken into a batch
	leaders int
}

// batchTurn is a queued request's place in its coalescer; its fields are
// guarded by the coalescer's mutex.
type batchTurn struct {
	done  chan struct{} // closed when its batch has finished with it
	batch *runningBatch // the batch that took it; nil while queued
	err   error         // set when its batch failed without deciding (a panic)
	// origin is the context of the request's wait span, nil when the
	// request is not traced; set before it is queued (batch_tracing.go).
	origin context.Context
}

func (t *batchTurn) turnOf() *batchTurn { return t }

// runningBatch is a batch being run: waiting counts its requests still
// waiting for the outcome; at zero, cancel ends the batch, which no one
// awaits any more.
type runningBatch struct {
	cancel  context.CancelFunc
	waiting int
	size    int
	// span is the batch's span, zero when no request of it is traced;
	// written before any of its requests is done.
	span trace.SpanContext
}

type reserveCoalescer = coalescer[*queuedReserve]

// queuedReserve is one reserve waiting for (or in) a batch. outcome is set
// by the batch before done.
type queuedReserve struct {
	batchTurn
	in    domain.ReserveInput
	fp    []byte
	actor string

	outcome batchOutcome
}

// batchOutcome is what a batch decided for one request.
type batchOutcome struct {
	route batchRoute
	res   domain.Reservation // for routeHeld
	err   error              // for routeRefused
	// madeID is the reservation row the batch inserted for the request
	// when the batch failed as a whole: if the batch in fact committed,
	// the basket path finds this row, and it is the request's own.
	madeID string
}

// batchRoute says how a request leaves the batch.
type batchRoute int

const (
	// routeBasket: the batch could not decide it (not enough stock for the
	// plain claim, a CODES SKU, an unknown code, a failed batch); it runs
	// alone through the general basket path, which says why.
	routeBasket  batchRoute = iota
	routeHeld               // held by the batch
	routeReplay             // its (checkout, key) already names a reservation
	routeRefused            // out of stock, with nothing to pre-order: err says so
)

func newCoalescer[T interface{ turnOf() *batchTurn }](name string, maxLeaders, maxBatch int, timeout time.Duration,
	logger func() *slog.Logger, run func(context.Context, []T)) *coalescer[T] {
	return &coalescer[T]{name: name, maxLeaders: maxLeaders, maxBatch: maxBatch, spreadAfter: batchSpreadAfter,
		timeout: timeout, logger: logger, run: run}
}

// errGaveUp marks a request that stopped waiting for its batch because its
// context ended; it wraps the context's error, so a request timeout reads
// as one.
var errGaveUp = errors.New("gave up waiting for its batch")

// batchSpreadAfter is how long a queued request waits for the running
// batches before it starts a leader beside them (see coalescer). Longer than
// a batch takes under load (about 2-8 ms at 32 clients on two cores), so a
// request normally joins the next batch; short against request deadlines.
const batchSpreadAfter = 10 * time.Millisecond

// submit queues item and returns once a batch has decided it (its outcome
// is filled in; the error is nil) or its batch failed as a whole (the
// error says why), or when ctx ends first (the error wraps ctx.Err(); see
// coalescer for what is left of the request then).
func (c *coalescer[T]) submit(ctx context.Context, item T) error {
	q := item.turnOf()
	q.done = make(chan struct{})
	wait := c.startWait(ctx, q)
	c.mu.Lock()
	c.queue = append(c.queue, item)
	if c.leaders == 0 {
		c.leaders++
		go c.lead()
	}
	c.mu.Unlock()
	if !c.await(ctx, q) {
		endWait(wait, q, true)
		return q.err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-q.done: // decided while the lock was awaited
		endWait(wait, q, true)
		return q.err
	default:
	}
	endWait(wait, q, false)
	if q.batch == nil {
		c.queue = slices.DeleteFunc(c.queue, func(t T) bool { return t.turnOf() == q })
		return fmt.Errorf("%s: %w while queued (nothing was written): %w", c.name, errGaveUp, ctx.Err())
	}
	if q.batch.waiting--; q.batch.waiting == 0 {
		q.batch.cancel()
	}
	return fmt.Errorf("%s: %w while it ran (a retry with the same key answers what it decided): %w", c.name, errGaveUp, ctx.Err())
}

// await waits until q's batch has finished with it (false) or ctx ends
// (true). Every spreadAfter that q is still queued, it starts a further
// leader if fewer than maxLeaders run, so a stalled batch delays the queue
// by about spreadAfter at most.
func (c *coalescer[T]) await(ctx context.Context, q *batchTurn) (ctxEnded bool) {
	spread := time.NewTimer(c.spreadAfter)
	defer spread.Stop()
	for {
		select {
		case <-q.done:
			return false
		case <-ctx.Done():
			return true
		case <-spread.C:
		}
		c.mu.Lock()
		queued := q.batch == nil
		if queued && c.leaders < c.maxLeaders {
			c.leaders++
			go c.lead()
		}
		c.mu.Unlock()
		if queued {
			spread.Reset(c.spreadAfter)
		}
	}
}

// lead runs batches until the queue is empty, or until it finishes a batch
// while another leader runs, then returns its slot (see coalescer).
func (c *coalescer[T]) lead() {
	for first := true; ; first = false {
		c.mu.Lock()
		n := min(len(c.queue), c.maxBatch)
		if n == 0 || (!first && c.leaders > 1) {
			c.leaders--
			c.mu.Unlock()
			return
		}
		batch := append([]T(nil), c.queue[:n]...)
		c.queue = append(c.queue[:0:0], c.queue[n:]...)
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		ctx = context.WithValue(ctx, handoffKey{}, c.handoff)
		rb := &runningBatch{cancel: cancel, waiting: n, size: n}
		for _, b := range batch {
			b.turnOf().batch = rb
		}
		c.mu.Unlock()

		ctx, span := c.startBatch(ctx, batch, rb)
		err := c.runRecovered(ctx, batch)
		cancel()
		if span != nil {
			span.End()
		}

		c.mu.Lock()
		for _, b := range batch {
			t := b.turnOf()
			t.err = err
			close(t.done)
		}
		c.mu.Unlock()
	}
}

// handoff starts a further leader for the requests queued meanwhile, if
// any wait and fewer than maxLeaders run. A batch calls it (batchHandoff)
// as it sends its last round trip, so the next batch's first round trips
// overlap its commit instead of following it: two batches in flight,
// staggered by most of a batch, each still as large as what queued during
// the other's round trips. Lock order is the same in every batch, so the
// overlap cannot deadlock; on a hot balance the next batch's lock waits
// for the commit, but its insert and its round trip are behind it.
func (c *coalescer[T]) handoff() {
	c.mu.Lock()
	if len(c.queue) > 0 && c.leaders < c.maxLeaders {
		c.leaders++
		go c.lead()
	}
	c.mu.Unlock()
}

// handoffKey carries a batch's coalescer's handoff in the batch's context.
type handoffKey struct{}

// batchHandoff lets the requests queued behind the batch running on ctx
// start their own batch now (see coalescer.handoff); nothing outside a
// batch.
func batchHandoff(ctx context.Context) {
	if h, ok := ctx.Value(handoffKey{}).(func()); ok {
		h()
	}
}

// runRecovered runs one batch; a panic in it is logged with its stack and
// becomes the error of every request in the batch.
func (c *coalescer[T]) runRecovered(ctx context.Context, batch []T) (err error) {
	defer func() {
		if p := recover(); p != nil {
			c.logger().Error("batch panicked; its requests fail", "coalescer", c.name, "requests", len(batch),
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = fmt.Errorf("%s batch panicked: %v", c.name, p)
			if c.panicked != nil {
				c.panicked()
			}
		}
	}()
	c.run(ctx, batch)
	return nil
}
