package domain

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits every entry point enforces; docs/api.md ("Limits") documents them. They are
// constants rather than settings because clients are written against them.
const (
	MaxIdentifierLength   = 128           // checkoutId, requestKey, orderRef, SKU and location codes
	MaxNameLength         = 200           // SKU and location names
	MaxReasonLength       = 64            // adjustStock reason
	MaxReferenceLength    = 512           // receiving and adjustment references
	MaxQuantity           = 1_000_000     // one receive, adjustment or reserve line
	MaxAvailabilitySKUs   = 500           // SKUs in one availability query
	MaxAvailabilityFilter = 100           // locations in one availability filter
	MaxPriority           = 1_000_000     // absolute value of a location priority
	MaxCheckoutTokenTTL   = 24 * 60 * 60  // seconds
	MaxLocations          = 1000          // locations: every SKU's balances and every sourced reserve are per location
	MaxReconciliationPage = 1000          // reconciliation issues in one answer
	DefaultCheckoutTTL    = 30 * 60       // seconds
	maxStoredQuantity     = 2_147_483_647 // PostgreSQL integer, GraphQL Int
)

// CheckIdentifier validates a client-chosen identifier: 1–128 printable
// characters. field names the input path for the error.
func CheckIdentifier(field []string, value string) error {
	if value == "" {
		return InvalidInput(field, "%s must not be empty", last(field))
	}
	if !utf8.ValidString(value) {
		return InvalidInput(field, "%s must be valid UTF-8", last(field))
	}
	if n := utf8.RuneCountInString(value); n > MaxIdentifierLength {
		return InvalidInput(field, "%s is %d characters long; at most %d are allowed", last(field), n, MaxIdentifierLength)
	}
	for _, r := range value {
		if !unicode.IsPrint(r) {
			return InvalidInput(field, "%s must contain printable characters only", last(field))
		}
	}
	return nil
}

// CheckText validates free text: non-blank, valid UTF-8, no control characters,
// at most max characters.
func CheckText(field []string, value string, max int) error {
	if strings.TrimSpace(value) == "" {
		return InvalidInput(field, "%s must not be blank", last(field))
	}
	if !utf8.ValidString(value) {
		return InvalidInput(field, "%s must be valid UTF-8", last(field))
	}
	if n := utf8.RuneCountInString(value); n > max {
		return InvalidInput(field, "%s is %d characters long; at most %d are allowed", last(field), n, max)
	}
	for _, r := range value {
		if unicode.IsControl(r) {
			return InvalidInput(field, "%s must not contain control characters", last(field))
		}
	}
	return nil
}

// CheckQuantity validates a positive quantity of at most MaxQuantity.
func CheckQuantity(field []string, q int) error {
	if q <= 0 {
		return InvalidInput(field, "%s must be positive, got %d", last(field), q)
	}
	if q > MaxQuantity {
		return InvalidInput(field, "%s must be at most %d, got %d", last(field), MaxQuantity, q)
	}
	return nil
}

func last(field []string) string {
	if len(field) == 0 {
		return "value"
	}
	return field[len(field)-1]
}
