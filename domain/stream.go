package domain

import (
	"context"
	"fmt"
	"time"
)

// StockEventStream is the live stream of published stock events that
// subscriptions read. events.Broker is one.
type StockEventStream interface {
	// SubscribeStockEvents streams the events with seq > after (from now
	// when after is nil) in seq order into sink, and closes sink when the
	// subscription ends: when ctx or the stream ends (done(nil)), when sink
	// stays full too long (done(*ErrSubscriberStalled)), when the stream is
	// stopping (done(*ErrStreamStopped)), or when after is older than the
	// retained events or a read fails (done(err)). done runs before sink is
	// closed; no goroutine outlives the subscription.
	SubscribeStockEvents(ctx context.Context, after *int64, sink StockEventSink, done func(error))
	// SubscriberBuffer is the capacity a subscriber's channel has: how far
	// it may fall behind before it stalls.
	SubscriberBuffer() int
}

// StockEventSink is one subscription's receiving end. NewStockEventSink
// makes one from a conversion and a channel.
type StockEventSink interface {
	// Deliver converts e and, if the subscriber wants it, sends it: at once
	// when there is room, else waiting until there is, ctx ends, stop is
	// closed or the channel stall returns fires. stall is called only when
	// the subscriber is full, and starts that wait's clock.
	Deliver(ctx context.Context, e StockEvent, stop <-chan struct{}, stall func() <-chan time.Time) (Delivery, error)
	// Close closes the subscriber's channel: the subscription ended.
	Close()
}

// Delivery is what became of one event offered to a StockEventSink.
type Delivery int

const (
	// Delivered: sent, or not wanted by the subscriber.
	Delivered Delivery = iota
	// DeliveryCancelled: the subscriber's context ended first.
	DeliveryCancelled
	// DeliveryStopped: the stream stopped first.
	DeliveryStopped
	// DeliveryStalled: the subscriber stayed full until the stall timeout.
	DeliveryStalled
)

// NewStockEventSink returns a sink that passes each event through convert
// (which filters with ok=false and may map, e.g. load a reservation) into
// out, a channel of the subscription's own (of SubscriberBuffer capacity)
// that Close closes.
func NewStockEventSink[T any](convert func(context.Context, StockEvent) (T, bool, error), out chan T) StockEventSink {
	return chanSink[T]{convert: convert, out: out}
}

type chanSink[T any] struct {
	convert func(context.Context, StockEvent) (T, bool, error)
	out     chan T
}

func (s chanSink[T]) Deliver(ctx context.Context, e StockEvent, stop <-chan struct{}, stall func() <-chan time.Time) (Delivery, error) {
	v, ok, err := s.convert(ctx, e)
	if err != nil || !ok {
		return Delivered, err
	}
	select {
	case s.out <- v:
		return Delivered, nil
	default:
	}
	stalled := stall()
	select {
	case s.out <- v:
		return Delivered, nil
	case <-ctx.Done():
		return DeliveryCancelled, nil
	case <-stop:
		return DeliveryStopped, nil
	case <-stalled:
		return DeliveryStalled, nil
	}
}

func (s chanSink[T]) Close() { close(s.out) }

// ErrStreamStopped is why a subscription ended when the stream stopped (the
// server is shutting down): not a completion, so the client resubscribes —
// to another instance — from where it was. Next is the seq of the first
// event it did not get (0 when it never started: resubscribe as before).
type ErrStreamStopped struct{ Next int64 }

func (e *ErrStreamStopped) Error() string {
	if e.Next == 0 {
		return "the server is shutting down; subscribe again"
	}
	return fmt.Sprintf("the server is shutting down at seq %d; "+
		"subscribe again with after set to the last seq received", e.Next)
}

// ErrSubscriberStalled is why a subscription whose reader stopped taking
// events ended.
type ErrSubscriberStalled struct {
	// Next is the seq of the first event it did not get.
	Next    int64
	Timeout time.Duration
}

func (e *ErrSubscriberStalled) Error() string {
	return fmt.Sprintf("subscriber did not read for %s and was disconnected at seq %d; "+
		"resubscribe with after set to the last seq it received", e.Timeout, e.Next)
}
