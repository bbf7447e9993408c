package domain

import "fmt"

// CodeLimitExceeded refuses a request that would go past a documented limit:
// a checkout's fair use (the message names the setting) or the catalog's
// bounds (MaxLocations).
const CodeLimitExceeded ErrorCode = "LIMIT_EXCEEDED"

// FairUse bounds what a shopper's checkout token may hold, so that one script
// with one token cannot take a flash sale's every unit, or keep it for a day.
// Service and admin keys are the shop's own backends and are bound only by the
// input limits (MaxHoldTTL and the rest). Zero fields are not allowed; the
// server's configuration fills every one (docs/api.md, "Limits").
type FairUse struct {
	MaxHoldTTL      int // seconds a checkout token's reserve or extend may ask for
	MaxHoldLifetime int // seconds from a hold's creation past which no extension moves its deadline
	MaxUnitsPerSKU  int // units of one SKU across a checkout's live holds
	MaxLiveHolds    int // live (held, not yet due) reservations of one checkout
	MaxWaitlistTTL  int // seconds a checkout token's waitlist entry may wait in line
}

// DefaultFairUse is what a storefront would pick: a hold long enough to pay,
// an hour at most with extensions, ten of any one item, twenty open holds,
// an hour in a waitlist's line.
var DefaultFairUse = FairUse{MaxHoldTTL: 30 * 60, MaxHoldLifetime: 60 * 60, MaxUnitsPerSKU: 10, MaxLiveHolds: 20, MaxWaitlistTTL: 60 * 60}

// For returns the limits that bind a caller: f for a checkout token, nil
// (unbounded) for everyone else.
func (f FairUse) For(a Actor) *FairUse {
	if a.Role != RoleCheckout {
		return nil
	}
	return &f
}

// CheckTTL refuses a hold TTL above MaxHoldTTL.
func (f *FairUse) CheckTTL(ttlSeconds int) error {
	if f == nil || ttlSeconds <= f.MaxHoldTTL {
		return nil
	}
	return &Error{Code: CodeLimitExceeded, Field: []string{"input", "ttlSeconds"},
		Message: fmt.Sprintf("a checkout token may hold stock for at most %d seconds at a time (INVENTORY_CHECKOUT_MAX_HOLD_TTL), got %d", f.MaxHoldTTL, ttlSeconds)}
}

// CheckHolds refuses a new hold for a checkout that already has live of them.
func (f *FairUse) CheckHolds(live int) error {
	if f == nil || live < f.MaxLiveHolds {
		return nil
	}
	return &Error{Code: CodeLimitExceeded, Field: []string{"input", "checkoutId"},
		Message: fmt.Sprintf("a checkout may have at most %d live holds (INVENTORY_CHECKOUT_MAX_LIVE_HOLDS); confirm or release one first", f.MaxLiveHolds)}
}

// CheckUnits refuses holding more units of sku than MaxUnitsPerSKU, given
// that the checkout's live holds already have held of them. available says
// how many more it may hold.
func (f *FairUse) CheckUnits(line int, sku string, held, more int) error {
	if f == nil || held+more <= f.MaxUnitsPerSKU {
		return nil
	}
	left := max(f.MaxUnitsPerSKU-held, 0)
	return &Error{Code: CodeLimitExceeded, Field: []string{"input", "lines", fmt.Sprint(line), "quantity"}, Line: &line, SKU: sku, Available: &left,
		Message: fmt.Sprintf("a checkout may hold at most %d units of %s (INVENTORY_CHECKOUT_MAX_UNITS_PER_SKU); it holds %d and asked for %d more", f.MaxUnitsPerSKU, sku, held, more)}
}

// CheckLifetime refuses moving a hold's deadline to more than
// MaxHoldLifetime seconds after its creation; afterSeconds is that distance.
func (f *FairUse) CheckLifetime(afterSeconds float64) error {
	if f == nil || afterSeconds <= float64(f.MaxHoldLifetime) {
		return nil
	}
	return &Error{Code: CodeLimitExceeded, Field: []string{"input", "ttlSeconds"},
		Message: fmt.Sprintf("a checkout's hold may last at most %d seconds from when it was made, extensions included (INVENTORY_CHECKOUT_MAX_HOLD_LIFETIME)", f.MaxHoldLifetime)}
}

// UnitsBySKU sums a basket's quantities per SKU, for CheckUnits, keeping the
// first line of each SKU for the error.
func UnitsBySKU(lines []ReserveLine) (units map[string]int, firstLine map[string]int) {
	units, firstLine = map[string]int{}, map[string]int{}
	for i, l := range lines {
		if _, ok := firstLine[l.SKU]; !ok {
			firstLine[l.SKU] = i
		}
		units[l.SKU] += l.Quantity
	}
	return units, firstLine
}
