package store

import (
	"sync"

	"inventory/domain"
)

// reserveCoalescer gathers concurrent single-line reserves so that one
// transaction makes many holds. On a hot balance every reserve otherwise waits
// for the previous one's row lock and commit, so throughput falls as buyers
// are added; in a batch the balance row is locked and updated once for all of
// them, and the holds, lines, ledger rows, events and expiry jobs are written
// set-based (see reserveBatch).
//
// There is no goroutine of its own. A request that arrives while fewer than
// maxLeaders batches run becomes a leader: it takes up to maxBatch queued
// requests (its own among them, unless another leader took it first), runs
// them as one batch, and repeats until its own request is done; then it hands
// the leadership to the oldest queued request, if any, and returns. So the
// queue is never left without a leader, and no request serves others for
// longer than it takes for its own result to come back.
type reserveCoalescer struct {
	maxLeaders, maxBatch int
	run                  func([]*queuedReserve) // fills each request's outcome

	mu      sync.Mutex
	queue   []*queuedReserve // not yet taken into a batch
	leaders int
}

// queuedReserve is one request waiting for (or in) a batch. Its fields after
// in are guarded by the coalescer's mutex.
type queuedReserve struct {
	in    domain.ReserveInput
	fp    []byte
	actor string

	wake    chan struct{} // signalled when done or made leader
	lead    bool
	done    bool
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

func newReserveCoalescer(maxLeaders, maxBatch int, run func([]*queuedReserve)) *reserveCoalescer {
	return &reserveCoalescer{maxLeaders: maxLeaders, maxBatch: maxBatch, run: run}
}

// submit queues q and returns its outcome once a batch has decided it.
func (c *reserveCoalescer) submit(q *queuedReserve) batchOutcome {
	q.wake = make(chan struct{}, 1)
	c.mu.Lock()
	c.queue = append(c.queue, q)
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
			return q.outcome
		}
		if done {
			return q.outcome
		}
		<-q.wake
	}
}

// lead runs batches until q is done, then passes the leadership on. If the
// queue is empty while q sits in another leader's batch, it gives up its slot
// and waits as a follower.
func (c *reserveCoalescer) lead(q *queuedReserve) {
	for {
		c.mu.Lock()
		if q.done || len(c.queue) == 0 {
			q.lead = false
			if len(c.queue) > 0 {
				next := c.queue[0] // still queued, so not done: it will lead
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
		batch := append([]*queuedReserve(nil), c.queue[:n]...)
		c.queue = append(c.queue[:0:0], c.queue[n:]...)
		c.mu.Unlock()

		c.run(batch)

		c.mu.Lock()
		for _, b := range batch {
			b.done = true
			signal(b)
		}
		c.mu.Unlock()
	}
}

// await waits for q's outcome as a follower; it may be made leader again.
func (c *reserveCoalescer) await(q *queuedReserve) {
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

func signal(q *queuedReserve) {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}
