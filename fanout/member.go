package fanout

import (
	"context"
	"encoding/json"
	"maps"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"inventory/socket"
)

// member is one subscriber of a group. Its goroutine is the one gqlgen's
// transport runs the subscription on (calling responses). Over a WebSocket,
// once it has caught up, the writer pool delivers its messages (pooled) and
// the goroutine only waits: for the end, or for a write the pool could not
// make at once, when it takes over again. Otherwise it takes what the log
// holds for it and writes it itself, so a slow socket holds up no one else.
type member struct {
	ctx  context.Context // the subscriber's (its socket's values)
	r    *Registry
	g    *group
	wake chan struct{} // capacity 1: something waits (signal)

	// Over a WebSocket the member writes its messages itself, framed as
	// gqlgen frames a data message: prefix, the shared payload, suffix (the
	// id and type). w is nil over SSE: responses go to the transport.
	w              socket.Writer
	prefix, suffix []byte
	suffixKey      string // suffix, as a key of a flush's cohorts
	frame          []byte
	spell          int // its spelling: an index of g.spellings, set at attach

	// Under g.mu; written by the member itself under the read lock
	// (take), by the group under the write lock.
	next         int64   // the index of the first log entry it has not taken
	owed         []entry // latest mode: newest values to take before the log
	stalledSince time.Time
	cut          error // it fell behind and was cut off
	// pooled: the writer pool delivers its messages (flush moves next for
	// it). Set by the member itself, under the read lock when it has caught
	// up (take), under the write lock when it leaves the pool (unpool).
	pooled bool

	// Between the member and the pool's job that holds its bytes; atomics,
	// read and written without g.mu (pool.go, writeJob.run).
	busy      atomic.Bool // a job holds its bytes: nothing else writes to its socket
	slow      atomic.Bool // the job could not write at once: its goroutine takes over
	quiescing atomic.Bool // its goroutine waits for busy to clear (unpool)
	carry     []byte      // set with slow: frames the job could not write at all
	carryN    int

	pending []entry // taken, not yet handed to the transport (SSE)
	scratch []entry
}

// maxKeptFrame: a frame buffer that grew past this is not kept for the next
// write (an idle subscriber holds little).
const maxKeptFrame = 64 << 10

func newMember(ctx context.Context, r *Registry) *member {
	m := &member{ctx: ctx, r: r, wake: make(chan struct{}, 1)}
	op := graphql.GetOperationContext(ctx)
	id, _ := op.Extensions[operationIDKey].(string)
	if w := socket.WriterFor(ctx); w != nil && id != "" {
		typ := "data" // graphql-ws
		if w.Subprotocol() == "graphql-transport-ws" {
			typ = "next"
		}
		quoted, _ := json.Marshal(id)
		m.w = w
		m.prefix = []byte(`{"payload":`)
		m.suffix = append(append([]byte(`,"id":`), quoted...), `,"type":"`+typ+`"}`...)
		m.suffixKey = string(m.suffix)
	}
	return m
}

func (m *member) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// responses is the member's gqlgen response handler: it returns nil (the
// subscription is complete) once the member left, was cut off, or took
// everything before the group's end; a WebSocket member's data never goes
// through it, so nil is returned only after the last data message was
// written, and gqlgen's complete (or error) message comes after it.
//
// It waits on m.ctx, the subscriber's, not on the context it is called
// with, which for the member that started the group is the group's (see
// Registry.join); both carry the subscriber's values.
func (m *member) responses(context.Context) *graphql.Response {
	for {
		if len(m.pending) > 0 {
			e := m.pending[0]
			m.pending[0] = entry{}
			m.pending = m.pending[1:]
			m.r.delivered.Add(1)
			return e.resp
		}
		if m.pooled {
			// The pool writes for it: wait for what the pool cannot do.
			select {
			case <-m.wake:
				m.unpool()
				continue
			case <-m.ctx.Done():
				m.unpool()
				m.g.detach(m)
				return nil
			}
		}
		batch, end, ended := m.take()
		if len(batch) > 0 {
			if m.w == nil {
				m.pending = batch
				continue
			}
			// An error means the socket is gone: gqlgen's reader sees it
			// too and ends ctx.
			_ = m.write(batch)
			clear(batch)
			continue
		}
		if ended {
			m.g.detach(m)
			if end != nil {
				m.report(m.ctx, end)
			}
			return nil
		}
		if m.pooled {
			continue // it waits as a pooled member, above
		}
		select {
		case <-m.wake:
		case <-m.ctx.Done():
			m.g.detach(m)
			return nil
		}
	}
}

// take returns what the member has to send, advancing it to the head of
// the log; or, with ended, why it ends (nil: the stream simply did). A
// WebSocket member that finds nothing to send has caught up: it joins the
// writer pool.
func (m *member) take() (batch []entry, end error, ended bool) {
	g := m.g
	g.mu.RLock()
	defer g.mu.RUnlock()
	if m.cut != nil {
		return nil, m.cut, true
	}
	batch = collect(m.scratch[:0], g.latest, m.owed, g.log[m.next-g.base:])
	if m.spell != 0 {
		for i := range batch {
			batch[i] = batch[i].respell(g, m.spell)
		}
	}
	m.owed, m.next = nil, g.head()
	m.scratch = batch
	if len(batch) == 0 && g.done {
		return nil, g.endErr, true
	}
	if len(batch) == 0 && m.w != nil {
		// Caught up: while pooled, an idle member holds no buffers.
		m.pooled, m.frame, m.scratch = true, nil, nil
	}
	return batch, nil, false
}

// unpool takes the member out of the writer pool: its goroutine delivers
// from here on, after the job that may hold its bytes is done, and first
// sends what that job could not.
func (m *member) unpool() {
	m.g.mu.Lock()
	m.pooled = false // no flush queues it from here on
	m.g.mu.Unlock()
	// A job queued before is written (without waiting) or handed back: the
	// job clears busy, then signals if it sees quiescing, which is set
	// before busy is read here (sequentially consistent atomics).
	m.quiescing.Store(true)
	for m.busy.Load() {
		<-m.wake
	}
	m.quiescing.Store(false)
	if m.slow.Load() {
		if m.carry != nil {
			// An error means the socket is gone: gqlgen's reader sees it too.
			_ = m.w.WriteFrames(m.carry)
			m.r.delivered.Add(int64(m.carryN))
			m.carry, m.carryN = nil, 0
		}
		m.slow.Store(false)
	}
}

// write sends batch in one go, each message framed for the member's id.
func (m *member) write(batch []entry) error {
	err := m.w.WriteMessages(func(yield func([]byte) bool) {
		for _, e := range batch {
			m.frame = append(append(append(m.frame[:0], m.prefix...), e.payload...), m.suffix...)
			if !yield(m.frame) {
				return
			}
		}
	})
	m.r.delivered.Add(int64(len(batch)))
	if cap(m.frame) > maxKeptFrame {
		m.frame = nil
	}
	return err
}

// report tells the member why its subscription ended, on its own context.
func (m *member) report(ctx context.Context, err error) {
	m.g.mu.RLock()
	report := m.g.report
	m.g.mu.RUnlock()
	if report == nil || m.cut != nil {
		report = m.r.cfg.Report
	}
	if report == nil {
		report = func(context.Context, error) {}
	}
	report(ctx, err)
}

// operationIDKey is where OperationIDs puts a WebSocket operation's id in
// its extensions. A client cannot set it: OperationIDs overwrites or
// removes it on every operation.
const operationIDKey = "inventory.fanout.operationId"

// OperationIDs is a gqlgen extension that records a WebSocket operation's
// id (which gqlgen keeps to itself) in the operation's extensions, for a
// member to frame its messages with. It runs while gqlgen builds the
// operation, before the socket's next message is read.
type OperationIDs struct{}

var (
	_ graphql.HandlerExtension        = OperationIDs{}
	_ graphql.OperationContextMutator = OperationIDs{}
)

// ExtensionName implements graphql.HandlerExtension.
func (OperationIDs) ExtensionName() string { return "FanoutOperationIDs" }

// Validate implements graphql.HandlerExtension.
func (OperationIDs) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext implements graphql.OperationContextMutator.
func (OperationIDs) MutateOperationContext(ctx context.Context, rc *graphql.OperationContext) *gqlerror.Error {
	id := socket.TakeStartID(ctx)
	_, spoofed := rc.Extensions[operationIDKey]
	if id == "" && !spoofed {
		return nil
	}
	ext := maps.Clone(rc.Extensions)
	if ext == nil {
		ext = map[string]any{}
	}
	delete(ext, operationIDKey)
	if id != "" {
		ext[operationIDKey] = id
	}
	rc.Extensions = ext
	return nil
}
