package resolvers

import (
	"context"
	"errors"
	"slices"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"inventory/domain"
	"inventory/fanout"
	"inventory/socket"
)

// stockFilter validates stockChanged's filters and returns the event
// conversion that applies them before anything is sent.
func stockFilter(skus, locations []string) (func(context.Context, domain.StockEvent) (*domain.StockEvent, bool, error), error) {
	if err := (domain.AvailabilityQuery{SKUs: skus, Locations: locations}).Validate(); err != nil {
		return nil, err
	}
	return func(_ context.Context, e domain.StockEvent) (*domain.StockEvent, bool, error) {
		if skus != nil && !slices.Contains(skus, e.SKU) || locations != nil && !slices.Contains(locations, e.Location) {
			return nil, false, nil
		}
		// A copy of its own, made only for an event that passes: were e's
		// address taken, every event would be moved to the heap on entry,
		// and a thousand filtered subscriptions filter every event (the
		// bench's filtered fan-out row spent a third of its CPU on that
		// garbage).
		out := e
		out.CheckoutID = "" // never leaves the server
		return &out, true, nil
	}, nil
}

// statusAfter is the status a reservation has after an event with this
// cause; other causes (stock arriving for a pre-order) change no status.
var statusAfter = map[domain.StockEventCause]domain.ReservationStatus{
	domain.CauseReserved:  domain.StatusHeld,
	domain.CauseConfirmed: domain.StatusConfirmed,
	domain.CauseReleased:  domain.StatusReleased,
	domain.CauseExpired:   domain.StatusExpired,
}

// reservationChanges turns a checkout's stock events into its reservations,
// once per status change: a transition that touched several balances writes
// several events, and the subscriber hears about it once. The event itself
// says whose it is and what status it leads to, so only an event that
// changes a status the subscriber has not heard of reads the reservation
// (its lines and deadline), once per message sent; every other event of the
// stream is dropped without a database read.
func (r *Resolver) reservationChanges(checkoutID string) func(context.Context, domain.StockEvent) (*domain.Reservation, bool, error) {
	sent := map[string]domain.ReservationStatus{}
	return func(ctx context.Context, e domain.StockEvent) (*domain.Reservation, bool, error) {
		if e.CheckoutID != checkoutID || e.ReservationID == nil {
			return nil, false, nil
		}
		status, changes := statusAfter[e.Cause]
		if !changes || sent[*e.ReservationID] == status {
			return nil, false, nil
		}
		res, err := r.Reservations.ReservationGetByID(ctx, domain.Scope{CheckoutID: checkoutID}, *e.ReservationID)
		if err != nil || res == nil {
			return nil, false, err
		}
		// The read may already show a later status (confirmed by the time
		// the hold's event arrives): that is what is sent, once.
		if sent[res.ID] == res.Status {
			return nil, false, nil
		}
		sent[res.ID] = res.Status
		return res, true, nil
	}
}

// subscribe streams the events after after (from now when nil) through
// convert into a new channel of the stream's subscriber capacity, which the
// subscription closes when it ends, after subscriptionEnded said why.
// A subscription shared by a group of subscribers (fanout) tags each value
// with what its members need to know of it (tag).
func subscribe[T any](ctx context.Context, stream domain.StockEventStream, after *int64, convert func(context.Context, domain.StockEvent) (T, bool, error), tag func(T) (string, int64)) <-chan T {
	out := make(chan T, stream.SubscriberBuffer())
	stream.SubscribeStockEvents(ctx, after, domain.NewStockEventSink(convert, out), subscriptionEnded(ctx))
	return fanout.Tag(ctx, out, tag)
}

// stockEventTag: a stock event's seq is a cut-off member's resume cursor.
func stockEventTag(e *domain.StockEvent) (string, int64) { return "", e.Seq }

// noTag: nothing to know of a value.
func noTag[T any](T) (string, int64) { return "", 0 }

// subscriptionEnded reports why a subscription ended (ReportSubscriptionEnd),
// to each member of its group when it is shared (fanout).
func subscriptionEnded(ctx context.Context) func(error) {
	return func(err error) { fanout.Ended(ctx, err, ReportSubscriptionEnd) }
}

// ReportSubscriptionEnd tells a WebSocket client why its subscription ended
// (an error message for that subscription) before it is completed. Over SSE
// the stream simply ends. It runs on the subscription's goroutine or the
// stream's, never on another subscriber's.
func ReportSubscriptionEnd(ctx context.Context, err error) {
	{
		if err == nil {
			return
		}
		var stopped *domain.ErrStreamStopped
		if errors.As(err, &stopped) {
			// The instance is shutting down: over a WebSocket, close it with
			// 1012 (service restart) and say where to resume; clients
			// reconnect. Not a subscription error: gqlgen reads those
			// without a lock when the connection ends, which at shutdown it
			// may be doing at this very moment. Over SSE the stream ends.
			socket.Close(ctx, socket.CloseServiceRestart, stopped.Error())
			return
		}
		var stalled *domain.ErrSubscriberStalled
		var expired *domain.ErrCursorExpired
		msg := "internal error: resubscribe with after set to the last seq received"
		if errors.As(err, &stalled) || errors.As(err, &expired) {
			msg = err.Error()
		}
		defer func() { _ = recover() }() // not a WebSocket: no error slot in ctx
		transport.AddSubscriptionError(ctx, &gqlerror.Error{Message: msg, Extensions: map[string]any{"code": "SUBSCRIPTION_ENDED"}})
	}
}
