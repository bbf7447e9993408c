package store

import (
	"sync"

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
// There is no goroutine of its own. A request that arrives while fewer than
// maxLeaders batches run becomes a leader: it takes up to maxBatch queued
// requests (its own among them, unless another leader took it first), runs
// them as one batch, and repeats until its own request is done; then it hands
// the leadership to the oldest queued request, if any, and returns. So the
// queue is never left without a leader, and no request serves others for
// longer than it takes for its own result to come back.
type coalescer[T interface{ turnOf() *batchTurn }] struct {
	maxLeaders, maxBatch int
	run                  func([]T) // fills each request's outcome

	mu      sync.Mutex
	queue   []T // not yet taken into a batch
	leaders int
}

// batchTurn is a queued request's place in its coalescer; its fields are
// guarded by the coalescer's mutex.
type batchTurn struct {
	wake chan struct{} // signalled when done or made leader
	lead bool
	done bool
}

func (t *batchTurn) turnOf() *batchTurn { return t }

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

func newCoalescer[T interface{ turnOf() *batchTurn }](maxLeaders, maxBatch int, run func([]T)) *coalescer[T] {
	return &coalescer[T]{maxLeaders: maxLeaders, maxBatch: maxBatch, run: run}
}

// submit queues q and returns once a batch has decided it (and filled in its
// outcome).
func (c *coalescer[T]) submit(item T) {
	q := item.turnOf()
	q.wake = make(chan struct{}, 1)
	c.mu.Lock()
	c.queue = append(c.queue, item)
	if c.leaders < c.maxLeaders {
		c.leaders++
		q.lead = true
	}
	c.mu.Unlock()
	for {
		c.mu.Lock()
		lead, done := q.lead, q.done
		c.mu.Unlock()
		if lead {
			c.lead(q)
			return
		}
		if done {
			return
		}
		<-q.wake
	}
}

// lead runs batches until q is done, then passes the leadership on. If the
// queue is empty while q sits in another leader's batch, it gives up its slot
// and waits as a follower.
func (c *coalescer[T]) lead(q *batchTurn) {
	for {
		c.mu.Lock()
		if q.done || len(c.queue) == 0 {
			q.lead = false
			if len(c.queue) > 0 {
				next := c.queue[0].turnOf() // still queued, so not done: it will lead
				next.lead = true
				signal(next)
			} else {
				c.leaders--
			}
			done := q.done
			c.mu.Unlock()
			if !done {
				c.await(q)
			}
			return
		}
		n := min(len(c.queue), c.maxBatch)
		batch := append([]T(nil), c.queue[:n]...)
		c.queue = append(c.queue[:0:0], c.queue[n:]...)
		c.mu.Unlock()

		c.run(batch)

		c.mu.Lock()
		for _, b := range batch {
			t := b.turnOf()
			t.done = true
			signal(t)
		}
		c.mu.Unlock()
	}
}

// await waits for q's outcome as a follower; it may be made leader again.
func (c *coalescer[T]) await(q *batchTurn) {
	for {
		<-q.wake
		c.mu.Lock()
		lead, done := q.lead, q.done
		c.mu.Unlock()
		if lead {
			c.lead(q)
			return
		}
		if done {
			return
		}
	}
}

func signal(q *batchTurn) {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}
