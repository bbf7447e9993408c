package events

import (
	"context"
	"errors"
	"time"

	"inventory/domain"
)

var _ domain.StockEventStream = (*Broker)(nil)

// SubscribeStockEvents implements domain.StockEventStream: a subscriber
// whose sink stays full for StallTimeout ends with
// *domain.ErrSubscriberStalled, and every subscription ends with
// *domain.ErrStreamStopped when Run ends.
func (b *Broker) SubscribeStockEvents(ctx context.Context, after *int64, sink domain.StockEventSink, done func(error)) {
	b.subscribe(ctx, after, sink, done, true)
}

// FollowStockEvents is SubscribeStockEvents for a reader inside this
// instance (the availability copy): the same stream, not counted among the
// live subscriptions that /metrics reports.
func (b *Broker) FollowStockEvents(ctx context.Context, after *int64, sink domain.StockEventSink, done func(error)) {
	b.subscribe(ctx, after, sink, done, false)
}

func (b *Broker) subscribe(ctx context.Context, after *int64, sink domain.StockEventSink, done func(error), counted bool) {
	b.subsMu.Lock()
	defer b.subsMu.Unlock()
	select {
	case <-b.stopped:
		// Shutting down: the stream ends at once, saying where to resume.
		stopped := &domain.ErrStreamStopped{}
		if after != nil {
			stopped.Next = *after + 1
		}
		done(stopped)
		sink.Close()
		return
	default:
	}
	b.subs.Add(1)
	if counted {
		b.subscribers.Add(1)
	}
	go func() {
		defer b.subs.Done()
		if counted {
			defer b.subscribers.Add(-1)
		}
		defer sink.Close()
		err := b.stream(ctx, after, sink)
		var stalled *domain.ErrSubscriberStalled
		if errors.As(err, &stalled) {
			b.stalledN.Add(1)
		}
		done(err)
	}()
}

// SubscriberBuffer is the configured capacity of a subscriber's channel:
// its bounded buffer.
func (b *Broker) SubscriberBuffer() int { return b.cfg.Buffer }

func (b *Broker) stream(ctx context.Context, after *int64, sink domain.StockEventSink) error {
	select {
	case <-b.ready:
	case <-ctx.Done():
		return nil
	case <-b.stopped:
		if after != nil {
			return &domain.ErrStreamStopped{Next: *after + 1}
		}
		return &domain.ErrStreamStopped{}
	}
	var cursor int64
	if after != nil {
		cursor = *after
	} else {
		b.mu.RLock()
		cursor = b.last
		b.mu.RUnlock()
	}
	stall := time.NewTimer(b.cfg.StallTimeout)
	defer stall.Stop()
	// A full subscriber gets StallTimeout from the moment it is found full.
	stallWait := func() <-chan time.Time {
		stall.Reset(b.cfg.StallTimeout)
		return stall.C
	}
	for {
		events, inMemory, wake := b.since(cursor, 256)
		if !inMemory {
			// Resuming from before what memory holds: read the database.
			var err error
			if events, err = b.store.StockEventsAfter(ctx, cursor, domain.MaxStockEventsPage); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		if len(events) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-b.stopped:
				return &domain.ErrStreamStopped{Next: cursor + 1}
			case <-wake:
				continue
			}
		}
		for _, e := range events {
			delivery, err := sink.Deliver(ctx, e, b.stopped, stallWait)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			switch delivery {
			case domain.DeliveryCancelled:
				return nil
			case domain.DeliveryStopped:
				return &domain.ErrStreamStopped{Next: e.Seq}
			case domain.DeliveryStalled:
				return &domain.ErrSubscriberStalled{Next: e.Seq, Timeout: b.cfg.StallTimeout}
			}
			cursor = e.Seq
		}
	}
}
