package fanout

import (
	"runtime"
	"sync"

	"inventory/socket"
)

// writers is the bounded pool that delivers a flush to the WebSocket
// members that keep up (member.pooled): instead of waking each member's
// goroutine for one write(2), a few goroutines write the group's framed
// bytes — the same slice for every member with the same operation id and
// subprotocol — to one socket after another, without ever waiting for a
// socket (socket.Writer.TryWrite). A member whose socket cannot take its
// bytes at once leaves the pool for its own goroutine (member.unpool),
// which waits for the socket and falls behind as before: a slow reader
// holds up no one else, and the group's stall rules apply to it.
//
// Workers exist only while there is work: at most max of them, started by
// submit, each ending when it finds the queue empty.
type writers struct {
	max int

	mu      sync.Mutex
	queue   []*writeJob
	running int
}

// writeChunk is how many members one job serves: enough that a flush to
// ten thousand members is a few hundred jobs, few enough that the workers
// share a flush.
const writeChunk = 64

func newWriters() *writers {
	return &writers{max: max(2, runtime.GOMAXPROCS(0))}
}

// submit queues jobs and starts workers for them, up to max.
func (w *writers) submit(jobs []*writeJob) {
	if len(jobs) == 0 {
		return
	}
	w.mu.Lock()
	w.queue = append(w.queue, jobs...)
	start := min(w.max-w.running, len(w.queue))
	w.running += start
	w.mu.Unlock()
	for range start {
		go w.work()
	}
}

func (w *writers) work() {
	for {
		w.mu.Lock()
		if len(w.queue) == 0 {
			w.queue = nil
			w.running--
			w.mu.Unlock()
			return
		}
		j := w.queue[0]
		w.queue[0] = nil
		w.queue = w.queue[1:]
		w.mu.Unlock()
		j.run()
	}
}

// writeJob is one flush's bytes for some of a group's pooled members.
type writeJob struct {
	g     *group
	items []writeItem
}

type writeItem struct {
	m      *member
	frames []byte // shared with the other members of its cohort: read only
	n      int    // messages in frames
	upto   int64  // the log's head when it was queued: the member's next
}

// run writes each item. A member is busy from the flush that queued it
// until its item is done: no other job, and not its own goroutine, writes
// to its socket meanwhile, so its messages stay in order.
func (j *writeJob) run() {
	more := false
	for _, it := range j.items {
		m := it.m
		res, err := m.w.TryWrite(it.frames)
		switch {
		case err != nil:
			// The socket is gone: its reader sees it too and ends the
			// subscription.
		case res == socket.Busy:
			// Another write has the socket: the member's goroutine sends
			// these bytes after it, waiting for it.
			m.carry, m.carryN = it.frames, it.n
			m.slow.Store(true)
		case res == socket.Queued:
			// The peer reads slowly: its goroutine takes over, and waits.
			m.r.delivered.Add(int64(it.n))
			m.slow.Store(true)
		default:
			m.r.delivered.Add(int64(it.n))
		}
		// slow and carry are written before busy is cleared: the goroutine
		// that sees busy false sees them.
		m.busy.Store(false)
		if m.slow.Load() || m.quiescing.Load() {
			m.signal()
		}
		// Messages that came after the flush that queued this one wait for
		// a flush that finds the member not busy: if that flush came first
		// (and passed it by), this sees them (atomics are sequentially
		// consistent: the flush appended before it saw busy, this cleared
		// busy before it looks) and arms another.
		more = more || it.upto < j.g.published.Load()
	}
	if more {
		j.g.kick()
	}
}
