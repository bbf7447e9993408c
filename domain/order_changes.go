package domain

import (
	"context"
	"strconv"
)

// OrderQuantity is one line of a fulfil or a cancel: how many units of an
// order's (SKU, Location) lines it moves.
type OrderQuantity struct {
	SKU      string
	Location string
	Quantity int
}

// OrderChangeInput is a FulfillOrder's or a CancelOrder's input. Reference
// names one shipment or one cancellation of the order and is its
// idempotency key per (OrderRef, Reference). Lines nil means every open
// unit: all that is in hand for a fulfil, all that has not shipped for a
// cancel. Reason is a cancel's (free text, like adjustStock's).
type OrderChangeInput struct {
	OrderRef  string
	Reference string
	Reason    string
	Lines     []OrderQuantity
}

// Validate checks the input before anything is read: identifiers, positive
// quantities, at most MaxBasketLines lines, each (SKU, Location) once.
func (in OrderChangeInput) Validate(cancel bool) error {
	if err := CheckIdentifier([]string{"input", "orderRef"}, in.OrderRef); err != nil {
		return err
	}
	if err := CheckIdentifier([]string{"input", "reference"}, in.Reference); err != nil {
		return err
	}
	if cancel {
		if err := CheckText([]string{"input", "reason"}, in.Reason, MaxReasonLength); err != nil {
			return err
		}
	}
	if in.Lines == nil {
		return nil
	}
	if len(in.Lines) == 0 || len(in.Lines) > MaxBasketLines {
		return InvalidInput([]string{"input", "lines"}, "lines, when given, has 1 to %d entries (omit it for the whole order), got %d", MaxBasketLines, len(in.Lines))
	}
	seen := make(map[[2]string]bool, len(in.Lines))
	for i, l := range in.Lines {
		field := func(name string) []string { return []string{"input", "lines", strconv.Itoa(i), name} }
		if err := lineError(i, CheckIdentifier(field("sku"), l.SKU)); err != nil {
			return err
		}
		if err := lineError(i, CheckIdentifier(field("location"), l.Location)); err != nil {
			return err
		}
		if err := lineError(i, CheckQuantity(field("quantity"), l.Quantity)); err != nil {
			return err
		}
		k := [2]string{l.SKU, l.Location}
		if seen[k] {
			return lineError(i, InvalidInput(field("sku"), "this SKU and location are given on an earlier line too; give one line with the total"))
		}
		seen[k] = true
	}
	return nil
}

// OrderChange is what a fulfil or a cancel answers: the order as it now is,
// and whether an earlier call with the same reference had already done it.
type OrderChange struct {
	Order    Order
	Replayed bool
}

// Orders ships and cancels confirmed orders. Implemented by store.Store.
type Orders interface {
	// OrderFulfill ships units in hand for the order (committed at an
	// ON_SHIPMENT location, where on_hand and committed fall together; a
	// record only elsewhere). Idempotent per (OrderRef, Reference).
	OrderFulfill(ctx context.Context, in OrderChangeInput) (OrderChange, error)
	// OrderCancel gives back what has not shipped: pre-ordered units not yet
	// allocated first, then units in hand, which go to waiting entries
	// before anyone else; a cancelled code is void. Idempotent per
	// (OrderRef, Reference).
	OrderCancel(ctx context.Context, in OrderChangeInput) (OrderChange, error)
}
