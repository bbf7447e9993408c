package fanout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"inventory/domain"
	"inventory/fanout"
	"inventory/socket"
)

// The package's tests run the registry as the server does — a gqlgen
// handler with the WebSocket (on socket.Implementation) and SSE
// transports, fanout.OperationIDs and Registry.AroundOperations — over a
// small schema of their own whose subscriptions read a feed the test
// publishes to, as the resolvers read the event broker: tagged with
// fanout.Tag, ended with fanout.Ended.
const testSchema = `
type Query { ok: Boolean }
type Subscription {
	stockChanged(after: Int, skus: [String!]): Event!
	availabilityChanged(skus: [String!]!, locations: [String!]): Event!
}
type Event { seq: Int! sku: String! location: String! available: Int! onHand: Int! viewer: String! pad: String! }
`

// event is what the feed publishes; seq numbers every event from 1.
type event struct {
	Seq       int64
	SKU       string
	Location  string
	Available int
	OnHand    int
}

// feed is the schema's event source: every execution of a subscription
// reads it from its own position on, and stops when its context ends.
type feed struct {
	pad string // each event's pad field: big messages fill a socket sooner

	mu      sync.Mutex
	events  []event
	changed chan struct{} // closed and replaced on every publish and at the end
	end     error         // why the feed ended (ended is set)
	ended   bool

	started atomic.Int64 // executions started
	live    atomic.Int64 // executions still reading
}

func newFeed() *feed { return &feed{changed: make(chan struct{})} }

// publish adds an event of sku and returns its seq.
func (f *feed) publish(sku string, available int) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := event{Seq: int64(len(f.events)) + 1, SKU: sku, Location: "AMS", Available: available, OnHand: available}
	f.events = append(f.events, e)
	close(f.changed)
	f.changed = make(chan struct{})
	return e.Seq
}

// stop ends every execution with err once it has sent every event.
func (f *feed) stop(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.end, f.ended = err, true
	close(f.changed)
	f.changed = make(chan struct{})
}

// subscribe streams the events after seq after (from now when nil) that
// keep pass, until ctx ends or the feed does (then done is called with the
// feed's reason before the channel closes, as the broker does).
func (f *feed) subscribe(ctx context.Context, after *int64, keep func(event) bool, done func(error)) <-chan event {
	out := make(chan event)
	f.started.Add(1)
	f.live.Add(1)
	f.mu.Lock()
	next := int64(len(f.events))
	if after != nil {
		next = min(*after, next)
	}
	f.mu.Unlock()
	go func() {
		defer f.live.Add(-1)
		defer close(out)
		for {
			f.mu.Lock()
			if next < int64(len(f.events)) {
				e := f.events[next]
				f.mu.Unlock()
				next++
				if !keep(e) {
					continue
				}
				select {
				case out <- e:
				case <-ctx.Done():
					return
				}
				continue
			}
			if f.ended {
				err := f.end
				f.mu.Unlock()
				done(err)
				return
			}
			wait := f.changed
			f.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// exec is the schema's executor: a subscription's one root field, its
// values tagged for the group (the SKU for availabilityChanged's latest
// values, the seq for stockChanged's cursor), each marshalled as the
// selection asks.
func (f *feed) exec(ctx context.Context) graphql.ResponseHandler {
	op := graphql.GetOperationContext(ctx)
	if op.Operation.Operation != ast.Subscription {
		return graphql.OneShot(graphql.ErrorResponse(ctx, "the test schema has subscriptions only"))
	}
	field := op.Operation.SelectionSet[0].(*ast.Field)
	args := field.ArgumentMap(op.Variables)
	skus, locations := stringList(args["skus"]), stringList(args["locations"])
	keep := func(e event) bool {
		return (skus == nil || slices.Contains(skus, e.SKU)) && (locations == nil || slices.Contains(locations, e.Location))
	}
	var after *int64
	if v := args["after"]; v != nil {
		n, err := strconv.ParseInt(fmt.Sprint(v), 10, 64)
		if err != nil {
			return graphql.OneShot(graphql.ErrorResponse(ctx, "after: %v", err))
		}
		after = &n
	}
	tag := func(e event) (string, int64) { return "", e.Seq }
	if field.Name == "availabilityChanged" {
		tag = func(e event) (string, int64) { return e.SKU, 0 }
	}
	viewer := domain.ActorFrom(ctx).Name
	done := func(err error) { fanout.Ended(ctx, err, report) }
	values := fanout.Tag(ctx, f.subscribe(ctx, after, keep, done), tag)
	return func(ctx context.Context) *graphql.Response {
		select {
		case e, ok := <-values:
			if !ok {
				return nil
			}
			obj := map[string]any{"seq": e.Seq, "sku": e.SKU, "location": e.Location, "available": e.Available,
				"onHand": e.OnHand, "viewer": viewer, "pad": f.pad}
			return &graphql.Response{Data: marshal(field, obj)}
		case <-ctx.Done():
			return nil
		}
	}
}

// stringList is a list argument as strings (nil when absent).
func stringList(v any) []string {
	list, _ := v.([]any)
	if list == nil {
		return nil
	}
	out := make([]string, 0, len(list))
	for _, s := range list {
		out = append(out, fmt.Sprint(s))
	}
	return out
}

// marshal writes {alias: {alias: value, …}} in the selection's order, as
// gqlgen's generated marshalers do.
func marshal(field *ast.Field, obj map[string]any) []byte {
	var b bytes.Buffer
	key, _ := json.Marshal(field.Alias)
	b.WriteString("{")
	b.Write(key)
	b.WriteString(":{")
	for i, s := range field.SelectionSet {
		f := s.(*ast.Field)
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.Alias)
		v, _ := json.Marshal(obj[f.Name])
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteString("}}")
	return b.Bytes()
}

// report tells a WebSocket subscriber why its subscription ended, as the
// resolvers' ReportSubscriptionEnd does; over SSE the stream simply ends.
func report(ctx context.Context, err error) {
	if err == nil {
		return
	}
	defer func() { _ = recover() }() // not a WebSocket: no error slot in ctx
	transport.AddSubscriptionError(ctx, &gqlerror.Error{Message: err.Error(), Extensions: map[string]any{"code": "SUBSCRIPTION_ENDED"}})
}

// env is one registry served over HTTP, and the feed its schema reads.
type env struct {
	t    *testing.T
	reg  *fanout.Registry
	feed *feed
	url  string

	slowClients sync.Map // dial's small-window connections, by client address

	mu      sync.Mutex
	reports []error // what Config.Report was told (cut-off members)
}

// setup serves a registry configured by cfg (Report is the test's own).
// A WebSocket's connection_init payload {"caller": name}, or an SSE
// request's X-Caller header, makes the subscriber the admin called name;
// without one it is anonymous.
func setup(t *testing.T, cfg fanout.Config) *env {
	t.Helper()
	e := &env{t: t, feed: newFeed()}
	cfg.Report = func(ctx context.Context, err error) {
		e.mu.Lock()
		e.reports = append(e.reports, err)
		e.mu.Unlock()
		report(ctx, err)
	}
	e.reg = fanout.New(cfg)
	schema := gqlparser.MustLoadSchema(&ast.Source{Input: testSchema})
	srv := handler.New(&graphql.ExecutableSchemaMock{
		SchemaFunc: func() *ast.Schema { return schema },
		ExecFunc:   e.feed.exec,
		ComplexityFunc: func(context.Context, string, string, int, map[string]any) (int, bool) {
			return 0, false
		},
	})
	srv.AddTransport(transport.Websocket{
		Implementation: socket.Implementation{},
		InitFunc: func(ctx context.Context, p transport.InitPayload) (context.Context, *transport.InitPayload, error) {
			return asCaller(ctx, p.GetString("caller")), nil, nil
		},
	})
	srv.AddTransport(transport.SSE{})
	srv.Use(fanout.OperationIDs{})
	srv.AroundOperations(e.reg.AroundOperations)
	ts := httptest.NewUnstartedServer(socket.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.ServeHTTP(w, r.WithContext(asCaller(r.Context(), r.Header.Get("X-Caller"))))
	})))
	ts.Listener = slowSockets{Listener: ts.Listener, clients: &e.slowClients}
	ts.Start()
	t.Cleanup(ts.Close)
	e.url = ts.URL
	return e
}

// slowSockets gives the server's end of each connection that dial made
// with a small window a send buffer of 16 KiB too (the kernel's grows to
// MiBs): such a member, when its client does not read, blocks within a few
// messages, not a few hundred. Other connections keep the kernel's
// buffers: a small one would wait for delayed ACKs.
type slowSockets struct {
	net.Listener
	clients *sync.Map // the client addresses of small-window connections
}

func (l slowSockets) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &slowSocket{Conn: c, clients: l.clients}, nil
}

// slowSocket sets its send buffer on its first write (the handshake's
// answer), by when the client has said whether it is one of them.
type slowSocket struct {
	net.Conn
	clients *sync.Map
	once    sync.Once
}

// SyscallConn lets the fan-out write to the socket without blocking, as it
// does to the server's own connections.
func (c *slowSocket) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(*net.TCPConn).SyscallConn()
}

func (c *slowSocket) Write(p []byte) (int, error) {
	c.once.Do(func() {
		if _, slow := c.clients.Load(c.RemoteAddr().String()); slow {
			_ = c.Conn.(*net.TCPConn).SetWriteBuffer(16 << 10)
		}
	})
	return c.Conn.Write(p)
}

func asCaller(ctx context.Context, name string) context.Context {
	if name == "" {
		return ctx
	}
	return domain.WithActor(ctx, domain.Actor{Role: domain.RoleAdmin, Name: name})
}

// cutReports returns what the registry reported to cut-off members.
func (e *env) cutReports() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.reports)
}

// waitFor polls cond until it holds, failing the test after 10 s.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("waited 10s for %s (stats %+v, executions started %d, live %d)",
				what, e.reg.Stats(), e.feed.started.Load(), e.feed.live.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitStats polls until the registry has groups groups and members
// members.
func (e *env) waitStats(groups, members int64) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("%d groups of %d members", groups, members), func() bool {
		s := e.reg.Stats()
		return s.Groups == groups && s.Members == members
	})
}
