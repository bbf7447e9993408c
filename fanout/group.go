package fanout

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"

	"inventory/domain"
	"inventory/socket"
)

// entry is one response of a group's execution: serialized once, read by
// every member.
type entry struct {
	resp    *graphql.Response
	payload []byte      // json.Marshal(resp): what gqlgen would send as the payload
	key     string      // latest mode: the value it replaces older ones of (a SKU)
	seq     int64       // the stock event's seq, for a cut-off member's cursor
	alts    *renditions // under the group's other spellings (respell); nil: it has one
}

type meta struct {
	key string
	seq int64
}

// tagQueue holds the tags of values on their way to gqlgen (Tag).
type tagQueue struct {
	mu sync.Mutex
	q  []meta
}

func (t *tagQueue) push(m meta) {
	t.mu.Lock()
	t.q = append(t.q, m)
	t.mu.Unlock()
}

func (t *tagQueue) pop() meta {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.q) == 0 {
		return meta{}
	}
	m := t.q[0]
	t.q = t.q[1:]
	return m
}

// group is the subscribers of one key and the one execution they share.
//
// Invariants, under mu: log holds the entries with indexes [base, head)
// that some member has yet to take (base is the smallest member's next);
// in latest mode, newest holds the newest entry of each key in the order
// the keys first appeared, which is everything a new member needs first.
type group struct {
	r      *Registry
	key    string
	latest bool
	cancel context.CancelFunc
	tags   tagQueue

	// mu is held for writing by whoever changes the group (attach, detach,
	// append, flush, cut) and for reading by a member taking its messages
	// (member.take): ten thousand members woken by one flush read the log
	// at once. Under the read lock a member changes only its own fields,
	// which only holders of the write lock read.
	mu         sync.RWMutex
	members    map[*member]struct{}
	log        []entry
	base       int64
	newest     []entry
	newestAt   map[string]int
	closed     bool  // takes no more members
	done       bool  // the execution ended: members end after the log
	endErr     error // why the stream ended (Ended), nil when it simply did
	report     func(context.Context, error)
	flushArmed bool
	offered    int64 // the head at the last flush: entries below it were offered to every member

	// spellings are the members' spellings of the question, the executed
	// document's first (index 0); a member's spell indexes it, and users
	// counts the members of each. A spelling no member uses is forgotten
	// (nil, its slot free for the next new one) with every rendition made
	// for it: kept, an anonymous caller subscribing and leaving under ever
	// new aliases grew the group by a copy of its newest values each time
	// (2.4 GB of heap from one address in a minute, none of it freed).
	// So what spellings cost is bounded by the members, whom the
	// subscription caps bound.
	spellings []*spelling
	users     []int

	// published is head(), for the writer pool to read without mu.
	published atomic.Int64
}

func newGroup(r *Registry, key string, latest bool) *group {
	r.groupsN.Add(1)
	return &group{r: r, key: key, latest: latest, members: map[*member]struct{}{}}
}

func (g *group) head() int64 { return g.base + int64(len(g.log)) }

// attach adds m unless the group takes no more members. A new member starts
// at the head of the log: it gets the messages that come after it joined,
// and in latest mode, before them, the newest value of each key (owed),
// which never is older than what follows. Both happen under mu, the lock
// append holds, so no message falls between the two.
func (g *group) attach(m *member, sp *spelling) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	m.g = g
	m.next = g.head()
	m.spell = g.spellingIndex(sp)
	for len(g.users) <= m.spell {
		g.users = append(g.users, 0)
	}
	g.users[m.spell]++
	if g.latest && len(g.newest) > 0 {
		m.owed = append([]entry(nil), g.newest...)
		m.signal()
	}
	g.members[m] = struct{}{}
	g.r.membersN.Add(1)
	return true
}

// spellingIndex is sp's index in g.spellings, added if new (mu held); 0
// for nil (the group's key holds the whole document).
func (g *group) spellingIndex(sp *spelling) int {
	if sp == nil {
		return 0
	}
	free := -1
	for i, have := range g.spellings {
		switch {
		case have != nil && have.key == sp.key:
			return i
		case have == nil && free < 0:
			free = i
		}
	}
	if free > 0 {
		g.spellings[free] = sp
		return free
	}
	g.spellings = append(g.spellings, sp)
	return len(g.spellings) - 1
}

// release counts a member of spelling i out (mu held), forgetting the
// spelling and its renditions when it was the last.
func (g *group) release(i int) {
	g.users[i]--
	if i == 0 || g.users[i] > 0 { // the document's own is never forgotten
		return
	}
	g.spellings[i] = nil
	for _, list := range [][]entry{g.newest, g.log} {
		for _, e := range list {
			if e.alts != nil {
				e.alts.forget(i)
			}
		}
	}
}

// detach removes m (it left, or was cut off). The last member to leave ends
// the execution; the group takes no more members from then on.
func (g *group) detach(m *member) {
	g.mu.Lock()
	if _, ok := g.members[m]; !ok {
		g.mu.Unlock()
		return
	}
	delete(g.members, m)
	g.release(m.spell)
	g.r.membersN.Add(-1)
	last := len(g.members) == 0 && !g.closed
	if last {
		g.closed = true
	}
	g.mu.Unlock()
	if last {
		g.r.forget(g)
		g.cancel()
	}
}

// run executes the subscription once for the group until its stream ends
// or its last member leaves.
func (g *group) run(ctx context.Context, responses graphql.ResponseHandler) {
	defer g.cancel()
	for {
		resp := responses(ctx)
		if resp == nil {
			break
		}
		g.r.executions.Add(1)
		payload, err := json.Marshal(resp)
		if err != nil {
			panic(err) // as gqlgen's transports do: a response always marshals
		}
		// gqlgen reuses the buffer behind resp.Data for the next response:
		// the members reading the log get a copy of their own.
		kept := *resp
		kept.Data = bytes.Clone(resp.Data)
		t := g.tags.pop()
		e := entry{resp: &kept, payload: payload, key: t.key, seq: t.seq}
		if g.latest {
			e.alts = &renditions{}
		}
		g.append(e)
	}
	g.mu.Lock()
	g.done, g.closed = true, true
	for m := range g.members {
		m.signal()
	}
	g.mu.Unlock()
	g.r.forget(g)
	g.r.groupsN.Add(-1)
}

// append adds e to the log and arms the flush that wakes the members. A
// response with errors closes the group to new members: a refusal (made
// before any value) ends it, and whoever comes next gets an execution, and
// an answer, of its own.
func (g *group) append(e entry) {
	g.mu.Lock()
	g.log = append(g.log, e)
	if g.latest && e.key != "" {
		if g.newestAt == nil {
			g.newestAt = map[string]int{}
		}
		if i, ok := g.newestAt[e.key]; ok {
			g.newest[i] = e
		} else {
			g.newestAt[e.key] = len(g.newest)
			g.newest = append(g.newest, e)
		}
	}
	g.published.Store(g.head())
	closing := len(e.resp.Errors) > 0 && !g.closed
	if closing {
		g.closed = true
	}
	g.armFlush()
	g.mu.Unlock()
	if closing {
		g.r.forget(g)
	}
}

// armFlush makes sure a flush comes (mu held).
func (g *group) armFlush() {
	if g.flushArmed {
		return
	}
	g.flushArmed = true
	wait := g.r.cfg.Flush
	if g.latest {
		wait = LatestFlush
	}
	time.AfterFunc(wait, g.flush)
}

// kick arms a flush for messages that a busy pooled member was passed by.
func (g *group) kick() {
	g.mu.Lock()
	g.armFlush()
	g.mu.Unlock()
}

// flush hands the pooled members' messages to the writer pool, wakes the
// other members with messages waiting, checks who fell behind, and drops
// the entries every member has taken.
func (g *group) flush() {
	g.mu.Lock()
	jobs := g.flushLocked()
	g.mu.Unlock()
	g.r.writers.submit(jobs)
}

func (g *group) flushLocked() []*writeJob {
	g.flushArmed = false
	head, now := g.head(), time.Now()
	minNext := head
	hard := int64(g.r.cfg.Backlog * HardBacklogFactor)
	var q pooledFlush
	for m := range g.members {
		if m.pooled {
			// It keeps up: it is at the head, or busy with the bytes of an
			// earlier flush (then the job's end arms another flush).
			if !m.busy.Load() && !m.slow.Load() && m.next < head {
				q.add(g, m, head)
			}
			minNext = min(minNext, m.next)
			continue
		}
		// What counts against a member is what it was offered at an
		// earlier flush and has not taken: what came since the last flush
		// is waiting for this one's wake-up, not for the member.
		late, backlog := g.offered-m.next, head-m.next
		switch {
		case g.latest:
			if backlog > hard {
				// Far behind: skip to the newest value of each key.
				m.owed, m.next = append([]entry(nil), g.newest...), head
			}
		case backlog > hard:
			g.cut(m)
			continue
		case late <= int64(g.r.cfg.Backlog):
			m.stalledSince = time.Time{}
		case m.stalledSince.IsZero():
			m.stalledSince = now
		case now.Sub(m.stalledSince) >= g.r.cfg.StallTimeout:
			g.cut(m)
			continue
		}
		if m.next < head || len(m.owed) > 0 {
			m.signal()
		}
		minNext = min(minNext, m.next)
	}
	g.offered = head
	if drop := minNext - g.base; drop > 0 {
		if drop == int64(len(g.log)) {
			clear(g.log)
			g.log = g.log[:0]
		} else {
			g.log = append([]entry(nil), g.log[drop:]...)
		}
		g.base = minNext
	}
	return q.jobs
}

// cut ends a member that fell behind, at the seq of the first message it
// did not take (mu held).
func (g *group) cut(m *member) {
	m.cut = &domain.ErrSubscriberStalled{Next: g.log[m.next-g.base].seq, Timeout: g.r.cfg.StallTimeout}
	delete(g.members, m)
	g.release(m.spell)
	g.r.membersN.Add(-1)
	g.r.cutN.Add(1)
	m.signal()
	if len(g.members) == 0 && !g.closed {
		g.closed = true
		go func() { g.r.forget(g); g.cancel() }()
	}
}

// closeSockets closes every member's socket with code: the execution
// refused the caller (4401, 4403), which over a WebSocket also closes the
// socket. The group takes no more members from then on, so none joins
// between the close and the refusal's message.
func (g *group) closeSockets(code int, reason string) {
	g.mu.Lock()
	g.closed = true
	members := make([]*member, 0, len(g.members))
	for m := range g.members {
		members = append(members, m)
	}
	g.mu.Unlock()
	g.r.forget(g)
	for _, m := range members {
		socket.Close(m.ctx, code, reason)
	}
}

// ended keeps the first reason the stream gave for its end.
func (g *group) ended(err error, report func(context.Context, error)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.endErr == nil && err != nil {
		g.endErr = err
		g.report = report
	}
}
