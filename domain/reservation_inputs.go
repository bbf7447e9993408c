package domain

import (
	"fmt"
	"regexp"
)

// Reservation limits, documented in docs/api.md ("Limits").
const (
	MaxBasketLines     = 100
	DefaultHoldTTL     = 900   // seconds
	MaxHoldTTL         = 86400 // seconds
	MaxSnapshotText    = 200   // title
	MaxUnitPriceLength = 32
)

// ReserveInput is one reserve request. (CheckoutID, RequestKey) names it: a
// retry with the same inputs returns the same reservation.
type ReserveInput struct {
	CheckoutID string
	RequestKey string
	Lines      []ReserveLine
	TTLSeconds int
	// Limits binds a checkout token's request (FairUse.For); nil for trusted
	// callers. It is not part of the request's identity: a retry is a retry
	// whoever sends it.
	Limits *FairUse
}

// ReserveLine asks for Quantity units of SKU at Location, or, when Location
// is nil, from locations in priority order.
type ReserveLine struct {
	SKU      string
	Location *string
	Quantity int
}

// Validate checks the request before anything is looked up or written.
func (in ReserveInput) Validate() error {
	if err := CheckIdentifier([]string{"input", "checkoutId"}, in.CheckoutID); err != nil {
		return err
	}
	if err := CheckIdentifier([]string{"input", "requestKey"}, in.RequestKey); err != nil {
		return err
	}
	if IsWaitlistOfferKey(in.RequestKey) {
		return InvalidInput([]string{"input", "requestKey"}, "requestKeys starting with %q are reserved for waitlist offers", WaitlistOfferKeyPrefix)
	}
	if len(in.Lines) == 0 {
		return InvalidInput([]string{"input", "lines"}, "a basket needs at least one line")
	}
	if len(in.Lines) > MaxBasketLines {
		return InvalidInput([]string{"input", "lines"}, "a basket has at most %d lines, got %d", MaxBasketLines, len(in.Lines))
	}
	if in.TTLSeconds < 1 || in.TTLSeconds > MaxHoldTTL {
		return InvalidInput([]string{"input", "ttlSeconds"}, "ttlSeconds must be between 1 and %d, got %d", MaxHoldTTL, in.TTLSeconds)
	}
	if err := in.Limits.CheckTTL(in.TTLSeconds); err != nil {
		return err
	}
	for i, l := range in.Lines {
		if err := lineError(i, CheckIdentifier([]string{"input", "lines", fmt.Sprint(i), "sku"}, l.SKU)); err != nil {
			return err
		}
		if l.Location != nil {
			if err := lineError(i, CheckIdentifier([]string{"input", "lines", fmt.Sprint(i), "location"}, *l.Location)); err != nil {
				return err
			}
		}
		if err := lineError(i, CheckQuantity([]string{"input", "lines", fmt.Sprint(i), "quantity"}, l.Quantity)); err != nil {
			return err
		}
	}
	// A basket that alone asks for more of a SKU than a checkout may hold
	// is refused before anything is looked up; what its live holds add is
	// checked where they are counted, under the checkout's lock.
	if in.Limits != nil {
		units, first := UnitsBySKU(in.Lines)
		for i, l := range in.Lines {
			if first[l.SKU] == i {
				if err := in.Limits.CheckUnits(i, l.SKU, 0, units[l.SKU]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func lineError(line int, err error) error {
	if e, ok := AsError(err); ok {
		e.Line = &line
		return e
	}
	return err
}

// ConfirmInput sells a held reservation as order OrderRef, with optional
// per-SKU snapshots of what the buyer saw.
type ConfirmInput struct {
	ID       string
	OrderRef string
	Lines    []OrderLineSnapshot
}

// OrderLineSnapshot is the title and price the buyer saw for a SKU.
type OrderLineSnapshot struct {
	SKU       string
	Title     *string
	UnitPrice *string
	Currency  *string
}

var (
	unitPricePattern = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)
	currencyPattern  = regexp.MustCompile(`^[A-Z]{3}$`)
)

// Validate checks the request before anything is looked up or written.
func (in ConfirmInput) Validate() error {
	if err := CheckIdentifier([]string{"input", "orderRef"}, in.OrderRef); err != nil {
		return err
	}
	if len(in.Lines) > MaxBasketLines {
		return InvalidInput([]string{"input", "lines"}, "at most %d snapshot lines, got %d", MaxBasketLines, len(in.Lines))
	}
	seen := map[string]bool{}
	for i, l := range in.Lines {
		field := func(name string) []string { return []string{"input", "lines", fmt.Sprint(i), name} }
		if err := lineError(i, CheckIdentifier(field("sku"), l.SKU)); err != nil {
			return err
		}
		if seen[l.SKU] {
			return lineError(i, InvalidInput(field("sku"), "SKU %s has two snapshot lines", l.SKU))
		}
		seen[l.SKU] = true
		if l.Title != nil {
			if err := lineError(i, CheckText(field("title"), *l.Title, MaxSnapshotText)); err != nil {
				return err
			}
		}
		if l.UnitPrice != nil && (len(*l.UnitPrice) > MaxUnitPriceLength || !unitPricePattern.MatchString(*l.UnitPrice)) {
			return lineError(i, InvalidInput(field("unitPrice"), "unitPrice must be a decimal number such as 19.99"))
		}
		if l.Currency != nil && !currencyPattern.MatchString(*l.Currency) {
			return lineError(i, InvalidInput(field("currency"), "currency must be an ISO 4217 code such as EUR"))
		}
	}
	return nil
}

// ExtendInput moves a held reservation's deadline to TTLSeconds from now.
type ExtendInput struct {
	ID         string
	TTLSeconds int
	Limits     *FairUse // a checkout token's bounds; nil for trusted callers
}

// Validate checks the request.
func (in ExtendInput) Validate() error {
	if in.TTLSeconds < 1 || in.TTLSeconds > MaxHoldTTL {
		return InvalidInput([]string{"input", "ttlSeconds"}, "ttlSeconds must be between 1 and %d, got %d", MaxHoldTTL, in.TTLSeconds)
	}
	return in.Limits.CheckTTL(in.TTLSeconds)
}

// ReleaseInput gives a held reservation's stock back.
type ReleaseInput struct {
	ID     string
	Reason ReleaseReason
}

// Validate checks the request.
func (in ReleaseInput) Validate() error {
	if !in.Reason.Valid() {
		return InvalidInput([]string{"input", "reason"}, "unknown release reason %q", in.Reason)
	}
	return nil
}
