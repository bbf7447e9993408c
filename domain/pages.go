package domain

import (
	"context"
	"time"
)

// CodeInvalidCursor refuses a Relay connection's after cursor that the
// server did not give out for that list: edited by hand, or given out for
// another list or another scope (another checkout's reservations, another
// endpoint's deliveries). Nothing is read.
const CodeInvalidCursor ErrorCode = "INVALID_CURSOR"

// InvalidCursor is the one refusal of a bad after cursor. Its message says
// what is wrong without quoting the cursor back.
func InvalidCursor() *Error {
	return &Error{Code: CodeInvalidCursor, Field: []string{"after"},
		Message: "after is not a cursor this list gave out: it was edited, or belongs to another list, checkout or endpoint"}
}

// Page is one keyset page of a list: at most the first rows asked for, and
// whether more follow them (the store reads first+1 rows to know).
type Page[T any] struct {
	Items []T
	More  bool
}

// The keyset positions the Relay connections continue after: the sort key
// of the last row of a page, whole, so the next page starts strictly after
// it however rows come and go in between. A nil position is the first page.
type (
	// ReservationKey: a checkout's reservations, newest first.
	ReservationKey struct {
		CreatedAt time.Time
		ID        string
	}
	// BalanceKey: balances by SKU code, then location code.
	BalanceKey struct{ SKU, Location string }
	// ReconciliationKey: issues by SKU, location ("" for none), kind, then
	// detail, which tells issues of one kind at one balance apart.
	ReconciliationKey struct{ SKU, Location, Kind, Detail string }
	// WaitlistLineKey: lines by entries waiting, most first, then SKU code.
	WaitlistLineKey struct {
		Waiting int
		SKU     string
	}
)

// BalancesRead is one page of balances and the newest stock event seq, read
// in one snapshot.
type BalancesRead struct {
	Page[Balance]
	Seq int64
}

// ListPages reads one keyset page of each list the Relay connections serve,
// each in one transaction, first rows (within the list's documented range)
// strictly after the position. Implemented by store.Store.
type ListPages interface {
	ReservationsPage(ctx context.Context, checkoutID string, after *ReservationKey, first int) (Page[Reservation], error)
	BalancesPage(ctx context.Context, after *BalanceKey, first int) (BalancesRead, error)
	// WebhookDeliveriesPage: an unknown endpoint is NOT_FOUND.
	WebhookDeliveriesPage(ctx context.Context, endpointID string, afterID int64, first int) (Page[WebhookDelivery], error)
	ReconciliationPage(ctx context.Context, after *ReconciliationKey, first int) (Page[ReconciliationIssue], error)
	WaitlistLinesPage(ctx context.Context, after *WaitlistLineKey, first int) (Page[WaitlistLine], error)
}
