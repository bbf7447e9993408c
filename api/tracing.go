package api

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"inventory/domain"
	"inventory/tracing"
)

// traceRequests makes a server span of each /graphql request (otelhttp),
// after authentication so that it knows who called: the trace context a
// request carries (traceparent) is taken from service and admin keys only.
// Anyone else's request starts a trace of its own, so an anonymous caller
// can neither join our traces to theirs nor force sampling with a sampled
// flag. WebSockets and event streams get no HTTP span (it would last as
// long as the connection); their operations are traced one by one
// (operationTracing), an event stream's under a key's traceparent. Off, it
// is no middleware at all.
func traceRequests(tr *tracing.Tracing) func(http.Handler) http.Handler {
	if tr == nil || !tr.Enabled {
		return func(next http.Handler) http.Handler { return next }
	}
	return func(next http.Handler) http.Handler {
		// otelhttp takes client.address from X-Forwarded-For whoever sent
		// it; the span names the address our rate limits use instead
		// (clientIP: a proxy's header only from a trusted proxy).
		named := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if ip := middleware.GetClientIP(r.Context()); ip != "" {
				trace.SpanFromContext(r.Context()).SetAttributes(attribute.String("client.address", ip))
			}
			next.ServeHTTP(w, r)
		})
		spanned := otelhttp.NewHandler(named, "graphql",
			otelhttp.WithTracerProvider(tr.Provider), otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
			otelhttp.WithPropagators(trustedContext{}),
			otelhttp.WithFilter(func(r *http.Request) bool { return !longLived(r) }),
			otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }))
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if eventStream(r) {
				// An event stream has no HTTP span, but a key's operation on
				// it still continues the caller's trace: its operation span
				// is the caller's child. A WebSocket's upgrade headers would
				// parent every operation of the connection, so they don't.
				r = r.WithContext(trustedContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
			}
			spanned.ServeHTTP(w, r)
		})
	}
}

// longLived says whether r opens a WebSocket or an event stream.
func longLived(r *http.Request) bool { return r.Header.Get("Upgrade") != "" || eventStream(r) }

// eventStream says whether r asks for an event stream (SSE).
func eventStream(r *http.Request) bool {
	return r.Header.Get("Upgrade") == "" && strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// trustedContext is W3C trace context for trusted callers (service and
// admin keys) and nothing for anyone else (see traceRequests). A key's
// tracestate is cut to what W3C asks us to carry (tracing.BoundTraceState):
// every span of the trace exports it again.
type trustedContext struct{}

func (trustedContext) Inject(context.Context, propagation.TextMapCarrier) {}

func (trustedContext) Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	switch domain.ActorFrom(ctx).Role {
	case domain.RoleService, domain.RoleAdmin:
		return tracing.BoundTraceState(propagation.TraceContext{}.Extract(ctx, c))
	}
	return ctx
}

func (trustedContext) Fields() []string { return propagation.TraceContext{}.Fields() }

// operationTracing is the gqlgen extension that makes a span of each
// GraphQL operation and of each root field's resolver under it. A span
// names the operation and its type, never its variables or document: codes,
// tokens and customers' checkout ids travel there. Its statements have a
// budget of SQL spans (tracing.MaxSQLSpans). A subscription's span is its
// setup: it ends when the resolver has returned its stream (gqlgen calls it
// before it hands over the response handler), not at a first message that
// may be hours away; a span left open for the life of a stream would hold
// its memory that long and be exported, if ever, with a meaningless
// duration.
// gqlgen's own tracing packages are not maintained at a version that builds
// with ours, and this is the little they did that we want.
type operationTracing struct{ tracer trace.Tracer }

var _ interface {
	graphql.HandlerExtension
	graphql.OperationInterceptor
	graphql.FieldInterceptor
} = operationTracing{}

// ExtensionName names the extension for gqlgen.
func (operationTracing) ExtensionName() string { return "OperationTracing" }

// Validate accepts every schema.
func (operationTracing) Validate(graphql.ExecutableSchema) error { return nil }

// InterceptOperation spans the operation.
func (o operationTracing) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	oc := graphql.GetOperationContext(ctx)
	kind, opName := "query", oc.OperationName
	if oc.Operation != nil {
		kind, opName = string(oc.Operation.Operation), oc.Operation.Name
	}
	name := "graphql " + kind
	if opName != "" {
		name += " " + opName
	}
	ctx, span := o.tracer.Start(ctx, name, trace.WithAttributes(
		attribute.String("graphql.operation.type", kind), attribute.String("graphql.operation.name", opName)))
	ctx, sqlBudget := tracing.WithSQLBudget(context.WithValue(ctx, fieldSpansKey{}, new(atomic.Int32)))
	handler := next(ctx)
	var once sync.Once
	end := func(resp *graphql.Response) {
		once.Do(func() {
			if n := sqlBudget.Dropped(); n > 0 {
				span.SetAttributes(attribute.Int("inventory.sql_spans_dropped", n))
			}
			if resp != nil && len(resp.Errors) > 0 {
				span.SetStatus(codes.Error, "the answer carries errors")
				span.SetAttributes(attribute.StringSlice("graphql.error.codes", errorCodes(resp.Errors)))
			}
			span.End()
		})
	}
	if kind == "subscription" {
		// Set up: a resolver's refusal marked the span (InterceptField).
		end(nil)
	}
	return func(ctx context.Context) *graphql.Response {
		resp := handler(ctx)
		end(resp)
		return resp
	}
}

// maxFieldSpans bounds the root-field spans of one operation: a thousand
// aliases of sku(code:) fit under the cost limit, and each span is memory
// and export bytes the caller does not pay for.
const maxFieldSpans = 16

// fieldSpansKey holds, in an operation's context, how many of its root
// fields were spanned.
type fieldSpansKey struct{}

// InterceptField spans each root field (Query, Mutation, Subscription)
// whose value a resolver computes, the first maxFieldSpans of an
// operation; nested fields are not spanned: a list of 500 availabilities
// would be 500 spans of microseconds.
func (o operationTracing) InterceptField(ctx context.Context, next graphql.Resolver) (any, error) {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || !fc.IsResolver || fc.Parent == nil || fc.Parent.Parent != nil {
		return next(ctx)
	}
	if n, ok := ctx.Value(fieldSpansKey{}).(*atomic.Int32); !ok || n.Add(1) > maxFieldSpans {
		return next(ctx)
	}
	operation := trace.SpanFromContext(ctx)
	ctx, span := o.tracer.Start(ctx, fc.Object+"."+fc.Field.Name)
	defer span.End()
	res, err := next(ctx)
	if err != nil {
		span.SetStatus(codes.Error, "resolver error")
		if fc.Object == "Subscription" {
			// Its operation's span ends before the refusal is answered.
			operation.SetStatus(codes.Error, "the subscription was refused")
		}
	}
	return res, err
}

// errorCodes are the distinct extensions.code values of errs: what failed,
// without a message that could quote the caller's input.
func errorCodes(errs gqlerror.List) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range errs {
		code, _ := e.Extensions["code"].(string)
		if code == "" {
			code = "UNKNOWN"
		}
		if !seen[code] && len(out) < 8 {
			seen[code] = true
			out = append(out, code)
		}
	}
	return out
}
