package domain

import (
	"context"
	"fmt"
	"time"
)

// StockEventCause says what changed a balance. The values are the GraphQL
// enum names.
type StockEventCause string

const (
	CauseReceived          StockEventCause = "RECEIVED"
	CauseAdjusted          StockEventCause = "ADJUSTED"
	CauseReserved          StockEventCause = "RESERVED"
	CauseConfirmed         StockEventCause = "CONFIRMED"
	CauseReleased          StockEventCause = "RELEASED"
	CauseExpired           StockEventCause = "EXPIRED"
	CauseImported          StockEventCause = "IMPORTED"
	CausePreorderAllocated StockEventCause = "PREORDER_ALLOCATED"
	CauseFulfilled         StockEventCause = "FULFILLED"
	CauseCancelled         StockEventCause = "CANCELLED"
)

// StockEvent is one balance change, with the balance after it. Seq orders all
// events in one dense sequence: 1, 2, 3, … with no gaps.
type StockEvent struct {
	Seq           int64
	SKU           string
	Location      string
	Cause         StockEventCause
	OnHand        int
	Reserved      int
	Committed     int
	At            time.Time
	ReservationID *string
	// CheckoutID is the checkout whose reservation caused the change, for
	// reservationChanged; never sent to stock subscribers.
	CheckoutID string
}

// Available is what could be reserved after the change.
func (e StockEvent) Available() int { return e.OnHand - e.Reserved - e.Committed }

// StockEventsChannel is the PostgreSQL NOTIFY channel the relay signals on,
// at most once per publish, with the newest seq as payload: the store
// notifies on it, every instance's broker listens on it.
const StockEventsChannel = "inventory_stock_events"

// StockHead is the newest published seq as one reader saw it, and the
// instant by which every change had been published through it: a reader
// that has applied events through Seq is no staler than CaughtUp (zero:
// not known).
type StockHead struct {
	Seq      int64
	CaughtUp time.Time
	At       time.Time // when it was read
}

// MaxStockEventsPage bounds one stockEvents query.
const MaxStockEventsPage = 1000

// ErrCursorExpired is an after cursor older than the retained events: the
// client must resync from availability and continue from the newest seq.
type ErrCursorExpired struct{ After, OldestKept int64 }

func (e *ErrCursorExpired) Error() string {
	return fmt.Sprintf("events after seq %d are no longer kept (the oldest kept follows seq %d): resync from availability, then subscribe without after",
		e.After, e.OldestKept)
}

// StockEvents reads the published event stream. Implemented by store.Store.
type StockEvents interface {
	// StockEventsAfter returns up to limit events with seq > after, in order.
	StockEventsAfter(ctx context.Context, after int64, limit int) ([]StockEvent, error)
}

// MaxBalancesPage bounds one balances query.
const MaxBalancesPage = 1000

// BalancePage is one page of every balance, read in one snapshot with the
// newest stock event seq, so a reader can resume events from there.
type BalancePage struct {
	Balances []Balance
	// Next is the cursor for the next page, nil on the last.
	Next *string
	Seq  int64
}
