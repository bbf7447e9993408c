package domain

import (
	"fmt"
	"strings"
	"time"
)

// WaitlistStatus is where a waitlist entry is in its one-way life:
// WAITING -> OFFERED | LEFT | EXPIRED. The values are the GraphQL enum names.
type WaitlistStatus string

const (
	// WaitlistWaiting is in line: the next units freed on its balance that
	// it fits go to it.
	WaitlistWaiting WaitlistStatus = "WAITING"
	// WaitlistOffered was handed a HELD reservation (Reservation names it).
	WaitlistOffered WaitlistStatus = "OFFERED"
	// WaitlistLeft was ended by its checkout (or a backend) before an offer.
	WaitlistLeft WaitlistStatus = "LEFT"
	// WaitlistExpired waited past its TTL without an offer.
	WaitlistExpired WaitlistStatus = "EXPIRED"
)

// Waitlist limits, documented in docs/api.md ("Limits"). An entry's TTL is how long it
// waits in line; the hold it is offered has the reserve default
// (DefaultHoldTTL), capped for a checkout token by FairUse.MaxHoldTTL.
const (
	DefaultWaitlistTTL = 60 * 60      // seconds an entry waits when joinWaitlist names no ttlSeconds
	MaxWaitlistTTL     = 24 * 60 * 60 // seconds an entry may wait, for anyone
	// WaitlistOfferKeyPrefix starts the requestKey of every reservation a
	// waitlist offers (the rest is the entry id). Reserve refuses keys with
	// it, so no client can take an offer's key before the offer is made.
	WaitlistOfferKeyPrefix = "waitlist:"
)

// WaitlistEntry is a checkout waiting in line for Quantity units of SKU, at
// Location or (nil) at whichever location frees them.
type WaitlistEntry struct {
	ID         string
	CheckoutID string
	RequestKey string
	SKU        string
	Location   *string
	Quantity   int
	Status     WaitlistStatus
	// Position counts the entries ahead of it that are still waiting; nil
	// unless it is waiting.
	Position  *int
	JoinedAt  time.Time
	ExpiresAt time.Time
	// ReservationID is the HELD reservation it was offered; nil before.
	ReservationID *string
	// OfferTTLSeconds is the TTL of the hold it is offered.
	OfferTTLSeconds int
	// SkippedReason says why units that came back and fitted it went to
	// entries behind it instead: its checkout was at a fair-use cap (an
	// offer is a hold). Nil if that never happened, and once it is offered.
	SkippedReason *string
}

// JoinWaitlistInput asks to wait in line. (CheckoutID, RequestKey) names it:
// a retry with the same inputs returns the same entry.
type JoinWaitlistInput struct {
	CheckoutID string
	RequestKey string
	SKU        string
	Location   *string
	Quantity   int
	TTLSeconds int // 1..MaxWaitlistTTL; callers default it to DefaultWaitlistTTL
	// Limits binds a checkout token's request (FairUse.For); nil for trusted
	// callers. Not part of the request's identity.
	Limits *FairUse
}

// Validate checks the request before anything is looked up or written.
func (in JoinWaitlistInput) Validate() error {
	if err := CheckIdentifier([]string{"input", "checkoutId"}, in.CheckoutID); err != nil {
		return err
	}
	if err := CheckIdentifier([]string{"input", "requestKey"}, in.RequestKey); err != nil {
		return err
	}
	if err := CheckIdentifier([]string{"input", "sku"}, in.SKU); err != nil {
		return err
	}
	if in.Location != nil {
		if err := CheckIdentifier([]string{"input", "location"}, *in.Location); err != nil {
			return err
		}
	}
	if err := CheckQuantity([]string{"input", "quantity"}, in.Quantity); err != nil {
		return err
	}
	if in.TTLSeconds < 1 || in.TTLSeconds > MaxWaitlistTTL {
		return InvalidInput([]string{"input", "ttlSeconds"}, "ttlSeconds must be between 1 and %d, got %d", MaxWaitlistTTL, in.TTLSeconds)
	}
	if err := in.Limits.CheckWaitlistTTL(in.TTLSeconds); err != nil {
		return err
	}
	return in.Limits.CheckWaitlistUnits(in.SKU, 0, in.Quantity)
}

// OfferTTL is the TTL of the hold an entry joined with limits is offered:
// the reserve default, capped for a checkout token by its MaxHoldTTL.
func (f *FairUse) OfferTTL() int {
	if f == nil {
		return DefaultHoldTTL
	}
	return min(DefaultHoldTTL, f.MaxHoldTTL)
}

// CheckWaitlistTTL refuses an entry TTL above MaxWaitlistTTL.
func (f *FairUse) CheckWaitlistTTL(ttlSeconds int) error {
	if f == nil || ttlSeconds <= f.MaxWaitlistTTL {
		return nil
	}
	return &Error{Code: CodeLimitExceeded, Field: []string{"input", "ttlSeconds"},
		Message: fmt.Sprintf("a checkout token may wait in line for at most %d seconds (INVENTORY_CHECKOUT_MAX_WAITLIST_TTL), got %d", f.MaxWaitlistTTL, ttlSeconds)}
}

// CheckWaitlistUnits refuses waiting for more units of sku than the
// checkout may hold (MaxUnitsPerSKU), given that its live holds already have
// held of them: the offer would be a hold past the limit.
func (f *FairUse) CheckWaitlistUnits(sku string, held, more int) error {
	if f == nil || held+more <= f.MaxUnitsPerSKU {
		return nil
	}
	left := max(f.MaxUnitsPerSKU-held, 0)
	return &Error{Code: CodeLimitExceeded, Field: []string{"input", "quantity"}, SKU: sku, Available: &left,
		Message: fmt.Sprintf("a checkout may hold at most %d units of %s (INVENTORY_CHECKOUT_MAX_UNITS_PER_SKU); it holds %d and would wait for %d more", f.MaxUnitsPerSKU, sku, held, more)}
}

// CheckWaitlistEntries refuses a new entry for a checkout that already has
// live of them (waiting or offered), bound by MaxLiveHolds: every entry may
// become a hold.
func (f *FairUse) CheckWaitlistEntries(live int) error {
	if f == nil || live < f.MaxLiveHolds {
		return nil
	}
	return &Error{Code: CodeLimitExceeded, Field: []string{"input", "checkoutId"},
		Message: fmt.Sprintf("a checkout may wait in at most %d lines at once (INVENTORY_CHECKOUT_MAX_LIVE_HOLDS); leave one first", f.MaxLiveHolds)}
}

// Why units went past an entry they fitted (WaitlistEntry.SkippedReason,
// as stored): an offer is a hold, and it would have taken the entry's
// checkout past the fair-use cap its join recorded.
const (
	SkippedLiveHolds   = "live_holds"    // FairUse.MaxLiveHolds
	SkippedUnitsPerSKU = "units_per_sku" // FairUse.MaxUnitsPerSKU
)

// WaitlistSkipReason is what an entry says, for the shopper, about the cap
// that passed it over (skipped, as stored), whose value was limit: which
// setting, and that it keeps its place. "" for no (or an unknown) reason.
func WaitlistSkipReason(skipped string, limit int, sku string) string {
	const tail = "; the entry keeps its place in line and is offered when units come back while its checkout is within its caps"
	switch skipped {
	case SkippedLiveHolds:
		return fmt.Sprintf("units came back and went to the entries behind it: an offer is a hold, and this checkout had %d live holds, "+
			"the most it may have (INVENTORY_CHECKOUT_MAX_LIVE_HOLDS)"+tail, limit)
	case SkippedUnitsPerSKU:
		return fmt.Sprintf("units came back and went to the entries behind it: an offer is a hold, and with it this checkout would hold "+
			"more than %d units of %s (INVENTORY_CHECKOUT_MAX_UNITS_PER_SKU)"+tail, limit, sku)
	}
	return ""
}

// IsWaitlistOfferKey reports whether a requestKey is reserved for the holds
// waitlists offer.
func IsWaitlistOfferKey(key string) bool { return strings.HasPrefix(key, WaitlistOfferKeyPrefix) }
