package metrics

import (
	"context"
	"time"

	"inventory/domain"
)

// Orders is domain.Orders that counts fulfil and cancel outcomes (the
// operations counter, as for reservations) and observes each shipment's
// commit-to-ship age.
type Orders struct {
	domain.Orders
	Metrics *Metrics
}

func (o Orders) count(op string, c domain.OrderChange, err error) {
	if c.Replayed && err == nil {
		o.Metrics.operations.WithLabelValues(op, "replayed").Inc()
		return
	}
	Reservations{Metrics: o.Metrics}.count(op, err)
}

// OrderFulfill counts the outcome and, for a shipment made now, observes how
// long ago its order was confirmed.
func (o Orders) OrderFulfill(ctx context.Context, in domain.OrderChangeInput) (domain.OrderChange, error) {
	c, err := o.Orders.OrderFulfill(ctx, in)
	o.count("fulfil", c, err)
	if err == nil && !c.Replayed {
		o.Metrics.shipAge.Observe(time.Since(c.Order.CreatedAt).Seconds())
	}
	return c, err
}

// OrderCancel counts the outcome.
func (o Orders) OrderCancel(ctx context.Context, in domain.OrderChangeInput) (domain.OrderChange, error) {
	c, err := o.Orders.OrderCancel(ctx, in)
	o.count("cancel", c, err)
	return c, err
}
