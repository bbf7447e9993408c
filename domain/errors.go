package domain

import (
	"errors"
	"fmt"
)

// ErrorCode is a business outcome a client can act on. The values are the
// GraphQL UserErrorCode names, so the API layer converts them without a table.
type ErrorCode string

// Business outcomes, returned in a mutation payload's userErrors.
const (
	CodeOutOfStock           ErrorCode = "OUT_OF_STOCK"
	CodeIdempotencyKeyReused ErrorCode = "IDEMPOTENCY_KEY_REUSED"
	CodeReservationExpired   ErrorCode = "RESERVATION_EXPIRED"
	CodeInvalidTransition    ErrorCode = "INVALID_TRANSITION"
	CodeBelowReserved        ErrorCode = "BELOW_RESERVED"
	CodeUnknownSKU           ErrorCode = "UNKNOWN_SKU"
	CodeUnknownLocation      ErrorCode = "UNKNOWN_LOCATION"
	CodeInvalidInput         ErrorCode = "INVALID_INPUT"
	CodeNotFound             ErrorCode = "NOT_FOUND"
	CodeAlreadyExists        ErrorCode = "ALREADY_EXISTS"
	CodeStaleQuantity        ErrorCode = "STALE_QUANTITY"
)

// Error is a business outcome: the request was understood and refused, and
// nothing changed. Field, Line, SKU and Available point the client at the cause.
type Error struct {
	Code      ErrorCode
	Message   string
	Field     []string // path of the offending input field, e.g. ["input", "quantity"]
	Line      *int     // 0-based index of the offending input line
	SKU       string   // the SKU concerned, when there is one
	Available *int     // what could have been had, for OUT_OF_STOCK and BELOW_RESERVED
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf builds a business error with a formatted message.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// InvalidInput names the input field that is wrong and why.
func InvalidInput(field []string, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidInput, Message: fmt.Sprintf(format, args...), Field: field}
}

// AsError finds a business error in err's chain.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// ErrUnauthenticated means the caller must present a valid token for this.
// ErrForbidden means the caller is known but may not do this. Both are
// transport-level failures (GraphQL errors), never payload userErrors.
var (
	ErrUnauthenticated = errors.New("authentication required")
	ErrForbidden       = errors.New("not allowed for this caller")
)

// LimitError is a request that exceeds a documented limit, or is malformed in a
// way no payload can describe (e.g. a query argument out of range). It is a
// GraphQL error with extensions.code BAD_REQUEST.
type LimitError struct{ Message string }

func (e *LimitError) Error() string { return e.Message }

// Limitf builds a LimitError.
func Limitf(format string, args ...any) error {
	return &LimitError{Message: fmt.Sprintf(format, args...)}
}
