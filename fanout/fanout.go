// Package fanout runs each live subscription once for all the subscribers
// that asked the same thing. Subscribers with the same document, operation
// name, variables and caller scope form a group (for availabilityChanged,
// the same question in any words: SKU order, aliases, spacing; each member
// reads the answer under its own response keys, spelling.go); the group's one gqlgen
// execution turns each event (or conflated tick) into a response, which is
// serialized once and appended to the group's log. Over a WebSocket, a
// member that keeps up is written to by a small bounded pool of writers
// (pool.go): each flush frames the new messages once per cohort — the same
// bytes for every member with the same message id — and the pool writes
// them to one socket after another without waiting for any, so a flush
// wakes no member's goroutine. A member whose socket cannot take them at
// once reads the log at its own pace on its own goroutine (the one gqlgen's
// transport runs the subscription on), writing all its pending messages in
// one system call; over SSE that goroutine hands them to the transport.
// The group never waits for a member: a stockChanged member that falls too
// far behind for too long is cut off with its resume cursor, as the event
// broker cuts off a slow subscriber; an availabilityChanged member that
// falls behind is sent the latest value of each SKU when it catches up.
package fanout

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"inventory/domain"
	"inventory/socket"
)

// Config tunes the fan-out; zero values take the defaults.
type Config struct {
	// Backlog is how many messages a member may have waiting before it
	// counts as stalled (INVENTORY_SUBSCRIBER_BUFFER, the broker's
	// per-subscriber buffer). Default 256.
	Backlog int
	// StallTimeout cuts off a stockChanged or reservationChanged member
	// whose backlog stayed past Backlog this long
	// (INVENTORY_SUBSCRIBER_STALL_TIMEOUT). Default 10 s.
	StallTimeout time.Duration
	// Flush is how long a group collects new messages before it wakes its
	// members: each member writes what it has in one system call, so a
	// burst of events is one write per subscriber, not one per event.
	// Default DefaultFlush. A latest-mode group (availabilityChanged, whose
	// execution already is one burst per push tick) waits LatestFlush.
	Flush time.Duration
	// Report tells one subscriber why its subscription ended (the
	// resolvers' words: an error message, a 1012 close at shutdown); a
	// member cut off for falling behind is told with
	// *domain.ErrSubscriberStalled. Required.
	Report func(context.Context, error)
}

// DefaultFlush is Config.Flush's default (INVENTORY_SUBSCRIPTION_FLUSH):
// short beside the event relay's 50 ms tick, long enough that the events of
// one fetch, which gqlgen executes one by one, mostly leave together. In the
// bench's 1,000-subscriber rows 5 ms did no worse than 20 ms (0.35x against
// 0.29x, 0.83x against 0.74x: within the machine's noise) at lower latency.
const DefaultFlush = 5 * time.Millisecond

// LatestFlush is how long a latest-mode group collects the values of one
// push tick (one per changed SKU) before its members write them.
const LatestFlush = time.Millisecond

// HardBacklogFactor bounds a member's backlog at Backlog times this, however
// briefly: past it a stockChanged member is cut off at once and an
// availabilityChanged one skips to the latest values, so a group's log (the
// messages its slowest member has yet to take) stays bounded.
const HardBacklogFactor = 64

func (c Config) withDefaults() Config {
	if c.Backlog <= 0 {
		c.Backlog = 256
	}
	if c.StallTimeout <= 0 {
		c.StallTimeout = 10 * time.Second
	}
	if c.Flush <= 0 {
		c.Flush = DefaultFlush
	}
	return c
}

// Registry holds one instance's groups.
type Registry struct {
	cfg Config

	mu      sync.Mutex
	groups  map[string]*group
	writers *writers

	executions atomic.Int64 // responses executed by gqlgen for subscriptions
	delivered  atomic.Int64 // messages handed to subscribers
	groupsN    atomic.Int64
	membersN   atomic.Int64
	cutN       atomic.Int64
}

// New returns an empty registry.
func New(cfg Config) *Registry {
	return &Registry{cfg: cfg.withDefaults(), groups: map[string]*group{}, writers: newWriters()}
}

// Stats is what the registry reports to /metrics.
type Stats struct {
	// Executions counts subscription responses gqlgen executed and
	// serialized: once per event per group.
	Executions int64
	// Delivered counts messages sent to subscribers: once per event per
	// member.
	Delivered int64
	// Groups and Members are the live groups and their subscribers.
	Groups, Members int64
	// Cut counts members cut off for falling behind.
	Cut int64
}

// Stats reads the counters.
func (r *Registry) Stats() Stats {
	return Stats{Executions: r.executions.Load(), Delivered: r.delivered.Load(),
		Groups: r.groupsN.Load(), Members: r.membersN.Load(), Cut: r.cutN.Load()}
}

// latestFields are the subscriptions whose members want the latest value of
// each key (availabilityChanged's SKU), not every message.
var latestFields = map[string]bool{"availabilityChanged": true}

// AroundOperations is a gqlgen operation interceptor; it must run inside
// the subscription caps (registered before them), which count each member.
func (r *Registry) AroundOperations(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	op := graphql.GetOperationContext(ctx)
	if op == nil || op.Operation == nil || op.Operation.Operation != ast.Subscription {
		return next(ctx)
	}
	key, sp, latest, ok := groupKey(ctx, op)
	if !ok {
		return r.alone(ctx, next)
	}
	m := r.join(ctx, key, sp, latest, next)
	return m.responses
}

// alone runs a subscription for one subscriber, as gqlgen does, counting
// its executions.
func (r *Registry) alone(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	responses := next(ctx)
	return func(ctx context.Context) *graphql.Response {
		resp := responses(ctx)
		if resp != nil {
			r.executions.Add(1)
			r.delivered.Add(1)
		}
		return resp
	}
}

// groupKey is what makes subscribers one group: the document, operation
// name and variables (the same execution), or for a latest field the
// question they ask in canonical words (canonicalQuestion, which also
// gives the subscriber's spelling of it; nil: the document's), and the
// caller's scope (the same answers to authorization). A subscription that resumes from a
// cursor (a root field with `after` set) runs alone: it owes its
// subscriber the events after that cursor, which a running group has
// delivered already.
func groupKey(ctx context.Context, op *graphql.OperationContext) (key string, sp *spelling, latest, ok bool) {
	if len(op.Operation.SelectionSet) != 1 {
		return "", nil, false, false
	}
	field, isField := op.Operation.SelectionSet[0].(*ast.Field)
	if !isField {
		return "", nil, false, false
	}
	if args := field.ArgumentMap(op.Variables); args["after"] != nil {
		return "", nil, false, false
	}
	a := domain.ActorFrom(ctx)
	question, canonical := "", false
	if latestFields[field.Name] {
		question, sp, canonical = canonicalQuestion(field, op.Variables)
	}
	if !canonical {
		vars, err := json.Marshal(op.Variables) // map keys sorted: canonical
		if err != nil {
			return "", nil, false, false
		}
		question = op.RawQuery + "\x00" + op.OperationName + "\x00" + string(vars)
	}
	var b strings.Builder
	for _, part := range []string{question, string(a.Role), a.Name, a.CheckoutID, a.TokenProblem} {
		b.WriteString(part)
		b.WriteByte(0)
	}
	return b.String(), sp, latestFields[field.Name], true
}

// join makes ctx's subscriber a member of the group for key, starting the
// group if there is none (or the one there takes no more members).
func (r *Registry) join(ctx context.Context, key string, sp *spelling, latest bool, next graphql.OperationHandler) *member {
	m := newMember(ctx, r)
	r.mu.Lock()
	g := r.groups[key]
	if g != nil && !g.attach(m, sp) {
		g = nil
	}
	var start bool
	if g == nil {
		g = newGroup(r, key, latest)
		g.attach(m, sp)
		r.groups[key] = g
		start = true
	}
	r.mu.Unlock()
	if start {
		// The group's execution outlives the member that started it: its
		// context keeps that member's values (the operation, the caller)
		// but not its cancellation nor its socket.
		//
		// next runs here, on the first member's goroutine, before this
		// interceptor returns: gqlgen's DispatchOperation records the
		// context next is called with as the one it hands the transport,
		// and writing it later, from another goroutine, would race with the
		// transport reading it. So the first member's transport calls
		// responses with the group's context, and a member waits on its
		// own (member.ctx) instead of the one it is called with.
		gctx, cancel := context.WithCancel(socket.Detach(context.WithoutCancel(ctx), g.closeSockets))
		g.cancel = cancel
		gctx = context.WithValue(gctx, groupKeyCtx{}, g)
		responses := next(gctx)
		go g.run(gctx, responses)
	}
	return m
}

// forget removes g from the registry if it is still the group for its key.
func (r *Registry) forget(g *group) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.groups[g.key] == g {
		delete(r.groups, g.key)
	}
}

type groupKeyCtx struct{}

func groupFrom(ctx context.Context) *group {
	g, _ := ctx.Value(groupKeyCtx{}).(*group)
	return g
}

// Tag passes in on, noting for each value the key and seq that the
// group's log records with the response gqlgen makes of it (the SKU of an
// availability, the seq of a stock event). Outside a group it returns in.
//
// Order: the value goes out on an unbuffered channel after its tag is
// queued, and gqlgen executes values one at a time in the order received,
// so the group's execution finds each response's tag at the head of the
// queue; a response with no tag queued (a refusal, made before any value)
// has none.
func Tag[T any](ctx context.Context, in <-chan T, tag func(T) (key string, seq int64)) <-chan T {
	g := groupFrom(ctx)
	if g == nil {
		return in
	}
	out := make(chan T)
	go func() {
		defer close(out)
		for v := range in {
			key, seq := tag(v)
			g.tags.push(meta{key: key, seq: seq})
			select {
			case out <- v:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// Ended reports why a subscription's stream ended, with report (the
// resolvers' way of telling one subscriber: an error message, or a 1012
// close at shutdown). Inside a group it is kept and each member is told
// once it has taken every message before the end, with its own context.
func Ended(ctx context.Context, err error, report func(context.Context, error)) {
	if g := groupFrom(ctx); g != nil {
		g.ended(err, report)
		return
	}
	report(ctx, err)
}
