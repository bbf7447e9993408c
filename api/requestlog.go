package api

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/vektah/gqlparser/v2/ast"
	"go.opentelemetry.io/otel/trace"

	"inventory/domain"
)

// requestLine is filled while a request runs, for its log line. Over a
// WebSocket each subscription runs in a goroutine of its own, possibly
// after the socket's handler returned, hence the lock; the line names the
// socket's latest operation.
type requestLine struct {
	mu        sync.Mutex
	operation string
}

func (l *requestLine) setOperation(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.operation = name
}

func (l *requestLine) operationName() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.operation
}

type requestLineKey struct{}

// logRequests writes one line per request when it ends: method, path,
// GraphQL operation, status, duration, request id and the caller's role.
// Never a token, a variable or a code: the line holds nothing a client sent
// but the operation's name. A WebSocket's line is written when it closes.
func logRequests(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			line := &requestLine{}
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			next.ServeHTTP(ww, r.WithContext(context.WithValue(r.Context(), requestLineKey{}, line)))
			status := ww.Status()
			switch {
			case status == 0 && r.Header.Get("Upgrade") != "":
				status = http.StatusSwitchingProtocols // a WebSocket, hijacked
			case status == 0:
				status = http.StatusOK
			}
			attrs := []slog.Attr{
				slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("operation", line.operationName()),
				slog.Int("status", status), slog.Duration("duration", time.Since(start)),
				slog.String("request_id", middleware.GetReqID(r.Context())),
				slog.String("role", strings.ToLower(string(domain.ActorFrom(r.Context()).Role)))}
			// With tracing on, the line names the request's trace.
			if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
				attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
			}
			logger.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
		})
	}
}

// operationName records each GraphQL operation's name (or, for an
// anonymous one, its type and first field, e.g. "mutation reserve") for the
// request's log line.
func operationName(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	if line, ok := ctx.Value(requestLineKey{}).(*requestLine); ok {
		oc := graphql.GetOperationContext(ctx)
		name := oc.OperationName
		if name == "" && oc.Operation != nil {
			name = oc.Operation.Name
		}
		if name == "" && oc.Operation != nil {
			name = string(oc.Operation.Operation)
			if len(oc.Operation.SelectionSet) > 0 {
				if f, ok := oc.Operation.SelectionSet[0].(*ast.Field); ok {
					name += " " + f.Name
				}
			}
		}
		line.setOperation(name)
	}
	return next(ctx)
}
