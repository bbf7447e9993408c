package api

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"

	"github.com/99designs/gqlgen/graphql"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"inventory/domain"
	"inventory/socket"
)

// Error codes in a GraphQL error's extensions.code (docs/api.md, "Errors").
const (
	CodeUnauthenticated = "UNAUTHENTICATED"
	CodeForbidden       = "FORBIDDEN"
	CodeBadRequest      = "BAD_REQUEST"
	CodeInternal        = "INTERNAL"
)

// presentError is the one place that decides what a client sees of an error.
// Auth failures and limits get their codes; gqlgen's own errors (parse,
// validation, complexity) keep theirs; anything unexpected is logged with the
// request id and shown as INTERNAL with no SQL, stack or wrapped detail.
func presentError(logger *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		gqlErr := graphql.DefaultErrorPresenter(ctx, err)
		cause := gqlErr.Err
		if cause == nil {
			// Raised by gqlgen itself: a parse, validation, complexity or input
			// coercion error. Its message is about the document, safe to show.
			if _, ok := gqlErr.Extensions["code"]; !ok {
				setCode(gqlErr, CodeBadRequest)
			}
			return gqlErr
		}
		var limit *domain.LimitError
		var expired *domain.ErrCursorExpired
		var userErr *domain.Error
		switch {
		case errors.Is(cause, domain.ErrUnauthenticated):
			setCode(gqlErr, CodeUnauthenticated)
			socket.Close(ctx, socket.CloseUnauthenticated, gqlErr.Message)
		case errors.Is(cause, domain.ErrForbidden):
			// Over a WebSocket the refusal also closes the socket with 4403,
			// so clients do not take it for a transient close and reconnect.
			setCode(gqlErr, CodeForbidden)
			socket.Close(ctx, socket.CloseForbidden, gqlErr.Message)
		case errors.As(cause, &expired):
			setCode(gqlErr, CodeBadRequest)
			gqlErr.Extensions["reason"] = "CURSOR_EXPIRED"
		case errors.As(cause, &limit):
			setCode(gqlErr, CodeBadRequest)
		case errors.As(cause, &userErr):
			// A business refusal outside a payload (e.g. a query argument).
			gqlErr.Message = userErr.Message
			setCode(gqlErr, CodeBadRequest)
			gqlErr.Extensions["userErrorCode"] = string(userErr.Code)
		default:
			var coded interface{ Extensions() map[string]any }
			if errors.As(cause, &coded) {
				// e.g. a complexity or input coercion error gqlgen wrapped:
				// its own code, unless gqlgen set one.
				for k, v := range coded.Extensions() {
					if _, set := gqlErr.Extensions[k]; !set {
						setExtension(gqlErr, k, v)
					}
				}
				return gqlErr
			}
			id := middleware.GetReqID(ctx)
			logger.ErrorContext(ctx, "internal error", "request_id", id, "path", gqlErr.Path.String(), "err", cause)
			gqlErr.Message = "internal error; request id " + id
			if errors.Is(cause, context.DeadlineExceeded) {
				// INVENTORY_REQUEST_TIMEOUT passed: nothing was changed.
				gqlErr.Message = "the request took too long and was abandoned; nothing changed; request id " + id
			}
			gqlErr.Err = nil
			setCode(gqlErr, CodeInternal)
			gqlErr.Extensions["requestId"] = id
		}
		return gqlErr
	}
}

// recoverPanic turns a resolver panic into an INTERNAL error after logging it.
func recoverPanic(logger *slog.Logger) graphql.RecoverFunc {
	return func(ctx context.Context, p any) error {
		logger.ErrorContext(ctx, "panic in resolver", "request_id", middleware.GetReqID(ctx), "panic", p, "stack", string(debug.Stack()))
		return errors.New("panic") // presented as INTERNAL
	}
}

func setCode(e *gqlerror.Error, code string) { setExtension(e, "code", code) }

func setExtension(e *gqlerror.Error, key string, value any) {
	if e.Extensions == nil {
		e.Extensions = map[string]any{}
	}
	e.Extensions[key] = value
}
