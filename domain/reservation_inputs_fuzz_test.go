package domain

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// FuzzReserveInputValidate: ReserveInput.Validate accepts exactly the
// requests whose checkoutId and requestKey are identifiers, with 1–100 lines,
// a ttlSeconds of 1–86,400 and, on every line, an identifier SKU, no location
// or an identifier one, and a quantity of 1..MaxQuantity. A refusal is
// INVALID_INPUT naming the first bad field (and its line), quietly.
//
// The fuzzer also chooses whether the request carries fair-use Limits (a
// FairUse with positive fields). With them, Validate also refuses, as
// LIMIT_EXCEEDED, a ttlSeconds above MaxHoldTTL (checked right after the TTL
// range, before any line: Field input.ttlSeconds, no Line, SKU or Available),
// and then, once every line is valid, the first SKU (in order of first
// appearance) whose quantities sum to more than MaxUnitsPerSKU (Field
// input.lines.<first line of the SKU>.quantity, that Line, that SKU, and
// Available = MaxUnitsPerSKU, as nothing is held yet). MaxHoldLifetime and
// MaxLiveHolds do not change the outcome.
func FuzzReserveInputValidate(f *testing.F) {
	f.Add("cart-1", "req-1", 900, uint8(1), "SKU-1", "AMS", 1, []byte{0}, false, 0, 0)
	f.Add("cart-1", "req-1", 900, uint8(3), "SKU-1", "AMS", 2, []byte{2, 0, 6}, false, 0, 0)
	f.Add("cart-1", "req-1", MaxHoldTTL, uint8(MaxBasketLines), "SKU-1", "AMS", MaxQuantity, []byte{2}, false, 0, 0)
	f.Add("cart-1", "req-1", 900, uint8(MaxBasketLines+1), "SKU-1", "AMS", 1, []byte{0}, false, 0, 0)
	f.Add("cart-1", "req-1", 900, uint8(0), "SKU-1", "AMS", 1, []byte{}, false, 0, 0)
	f.Add("cart-1", "req-1", 0, uint8(1), "SKU-1", "AMS", 1, []byte{}, false, 0, 0)
	f.Add("cart-1", "req-1", MaxHoldTTL+1, uint8(1), "SKU-1", "AMS", 1, []byte{}, false, 0, 0)
	f.Add("cart-1", "req-1", math.MinInt, uint8(1), "SKU-1", "AMS", 1, []byte{}, false, 0, 0)
	f.Add("", "req-1", 900, uint8(1), "SKU-1", "AMS", 1, []byte{}, false, 0, 0)
	f.Add("cart-1", strings.Repeat("k", MaxIdentifierLength+1), 900, uint8(1), "SKU-1", "AMS", 1, []byte{}, false, 0, 0)
	f.Add("cart-1", "req-1", 900, uint8(2), "日本語", "AMS", 1, []byte{1}, false, 0, 0)
	f.Add("cart-1", "req-1", 900, uint8(2), "SKU-1", "AMS\x00", 1, []byte{2}, false, 0, 0)
	f.Add("cart-1", "req-1", 900, uint8(2), "SKU-1", "", 1, []byte{0, 2}, false, 0, 0)
	f.Add("cart-1", "req-1", 900, uint8(2), "SKU-1", "AMS", 0, []byte{0}, false, 0, 0)
	f.Add("cart-1", "req-1", 900, uint8(2), "SKU-1", "AMS", MaxQuantity+1, []byte{0}, false, 0, 0)
	f.Add("cart-1", "req-1", 900, uint8(4), "SKU-1", "AMS", 5, []byte{0, 0xfc, 4}, false, 0, 0)
	f.Add("cart\t1", "req-1", 900, uint8(1), "SKU-1", "AMS", 1, []byte{}, false, 0, 0)
	f.Add("cart-1", "req-1", 900, uint8(1), strings.Repeat("s", 4096), "AMS", 1, []byte{}, false, 0, 0)

	// Fair-use limits: TTL and units at, just over and far over the bounds.
	f.Add("cart-1", "req-1", 1800, uint8(1), "SKU-1", "AMS", 10, []byte{0}, true, 1800, 10)
	f.Add("cart-1", "req-1", 1801, uint8(1), "SKU-1", "AMS", 10, []byte{0}, true, 1800, 10)
	f.Add("cart-1", "req-1", 1801, uint8(0), "SKU-1", "AMS", 10, []byte{0}, true, 1800, 10)
	f.Add("cart-1", "req-1", 1801, uint8(1), "SKU-1", "AMS", 0, []byte{0}, true, 1800, 10)
	f.Add("cart-1", "req-1", 900, uint8(1), "SKU-1", "AMS", 11, []byte{0}, true, 1800, 10)
	f.Add("cart-1", "req-1", 900, uint8(2), "SKU-1", "AMS", 5, []byte{0}, true, 1800, 10)
	f.Add("cart-1", "req-1", 900, uint8(3), "SKU-1", "AMS", 5, []byte{0}, true, 1800, 10)
	f.Add("cart-1", "req-1", 900, uint8(3), "SKU-1", "AMS", 5, []byte{1, 0, 0}, true, 1800, 10)
	f.Add("cart-1", "req-1", 900, uint8(4), "SKU-1", "AMS", 6, []byte{1, 0, 1, 0}, true, 1800, 10)
	f.Add("cart-1", "req-1", 900, uint8(3), "SKU-1", "AMS", 9, []byte{0, 0x0c, 0}, true, 1800, 10)
	f.Add("cart-1", "req-1", 900, uint8(2), "SKU-1", "AMS", 0, []byte{0, 0}, true, 1800, 10)
	f.Add("cart-1", "req-1", MaxHoldTTL, uint8(MaxBasketLines), "SKU-1", "AMS", MaxQuantity, []byte{0}, true, MaxHoldTTL, MaxBasketLines*MaxQuantity)
	f.Add("cart-1", "req-1", MaxHoldTTL, uint8(MaxBasketLines), "SKU-1", "AMS", MaxQuantity, []byte{0}, true, MaxHoldTTL-1, MaxBasketLines*MaxQuantity-1)
	f.Add("cart-1", "req-1", 1, uint8(1), "SKU-1", "AMS", 1, []byte{0}, true, 1, 1)
	f.Add("cart-1", "req-1", 2, uint8(1), "SKU-1", "AMS", 2, []byte{0}, true, 0, math.MinInt)
	f.Add("cart-1", "req-1", 900, uint8(1), strings.Repeat("s", MaxIdentifierLength), "AMS", MaxQuantity, []byte{0}, true, math.MaxInt, 1)

	f.Fuzz(func(t *testing.T, checkoutID, requestKey string, ttl int, n uint8, sku, location string, quantity int, shape []byte,
		limited bool, maxTTL, maxUnits int) {
		in := ReserveInput{CheckoutID: checkoutID, RequestKey: requestKey, TTLSeconds: ttl,
			Lines: make([]ReserveLine, int(n)%(MaxBasketLines+20))}
		if limited {
			in.Limits = &FairUse{MaxHoldTTL: positive(maxTTL), MaxUnitsPerSKU: positive(maxUnits),
				MaxHoldLifetime: positive(maxTTL ^ maxUnits), MaxLiveHolds: positive(maxUnits - maxTTL)}
		}
		for i := range in.Lines {
			var b byte
			if len(shape) > 0 {
				b = shape[i%len(shape)]
			}
			l := ReserveLine{SKU: sku, Quantity: quantity}
			if b&1 != 0 {
				l.SKU = sku[:len(sku)/2] // may cut a rune in two
			}
			if b&2 != 0 {
				loc := location
				l.Location = &loc
			}
			if b&4 != 0 {
				l.Quantity = int(int8(b)) >> 3 // small, zero or negative
			}
			in.Lines[i] = l
		}

		request := []check{
			{isIdentifier(checkoutID), []string{"input", "checkoutId"}, nil},
			{isIdentifier(requestKey), []string{"input", "requestKey"}, nil},
			{len(in.Lines) > 0, []string{"input", "lines"}, nil},
			{len(in.Lines) <= MaxBasketLines, []string{"input", "lines"}, nil},
			{ttl >= 1 && ttl <= MaxHoldTTL, []string{"input", "ttlSeconds"}, nil},
		}
		var lines []check
		for i, l := range in.Lines {
			path := func(name string) []string { return []string{"input", "lines", fmt.Sprint(i), name} }
			lines = append(lines, check{isIdentifier(l.SKU), path("sku"), intp(i)})
			if l.Location != nil {
				lines = append(lines, check{isIdentifier(*l.Location), path("location"), intp(i)})
			}
			lines = append(lines, check{isQuantity(l.Quantity), path("quantity"), intp(i)})
		}

		err := in.Validate()
		inputs := []string{checkoutID, requestKey, sku, location}
		if want := firstFailure(request...); want != nil {
			requireInvalidInput(t, err, want.field, want.line, inputs...)
			return
		}
		if in.Limits != nil && ttl > in.Limits.MaxHoldTTL {
			requireLimitExceeded(t, err, limitFault{field: []string{"input", "ttlSeconds"},
				limit: in.Limits.MaxHoldTTL, setting: "INVENTORY_CHECKOUT_MAX_HOLD_TTL"}, inputs...)
			return
		}
		if want := firstFailure(lines...); want != nil {
			requireInvalidInput(t, err, want.field, want.line, inputs...)
			return
		}
		if in.Limits != nil {
			if want := basketOverLimit(in.Lines, in.Limits.MaxUnitsPerSKU); want != nil {
				requireLimitExceeded(t, err, *want, inputs...)
				return
			}
		}
		if err != nil {
			t.Fatalf("Validate(%+v) = %v, want nil", in, err)
		}
		if in.Limits != nil {
			// The limits Validate does not check do not matter to it.
			other := *in.Limits
			other.MaxHoldLifetime, other.MaxLiveHolds = 1, 1
			in.Limits = &other
			if err := in.Validate(); err != nil {
				t.Fatalf("Validate with MaxHoldLifetime and MaxLiveHolds 1 = %v, want nil", err)
			}
		}
	})
}

// basketOverLimit is the oracle for a basket's units: the quantities of each
// SKU summed (the lines are valid, so no sum overflows), the SKUs taken in
// the order they first appear, and the first whose sum is over limit refused
// at its first line, with all of limit still available (nothing is held).
func basketOverLimit(lines []ReserveLine, limit int) *limitFault {
	var order []string
	sum, first := map[string]int{}, map[string]int{}
	for i, l := range lines {
		if _, seen := first[l.SKU]; !seen {
			first[l.SKU] = i
			order = append(order, l.SKU)
		}
		sum[l.SKU] += l.Quantity
	}
	for _, sku := range order {
		if sum[sku] > limit {
			line := first[sku]
			return &limitFault{field: []string{"input", "lines", fmt.Sprint(line), "quantity"}, line: &line,
				sku: sku, available: intp(limit), limit: limit, setting: "INVENTORY_CHECKOUT_MAX_UNITS_PER_SKU"}
		}
	}
	return nil
}

// FuzzConfirmInputValidate: ConfirmInput.Validate accepts exactly an
// identifier orderRef with at most 100 snapshot lines, each for a distinct
// identifier SKU, with an optional title (text, ≤ 200 characters), unitPrice
// (a decimal of ≤ 32 characters) and currency (three capital letters). A
// refusal is INVALID_INPUT naming the first bad field and its line.
func FuzzConfirmInputValidate(f *testing.F) {
	f.Add("order-1", "SKU-1,SKU-2", uint8(2), "Headphones", "19.99", "EUR", []byte{14})
	f.Add("order-1", "SKU-1,SKU-2", uint8(2), "Headphones", "19.99", "EUR", []byte{0, 1})
	f.Add("order-1", "SKU-1", uint8(0), "", "", "", []byte{})
	f.Add("order-1", "S", uint8(MaxBasketLines), "t", "1", "USD", []byte{0})
	f.Add("order-1", "S", uint8(MaxBasketLines+1), "t", "1", "USD", []byte{0})
	f.Add("order-1", "SKU-1", uint8(1), " ", "-0.5", "eur", []byte{2})
	f.Add("order-1", "SKU-1", uint8(1), "t", "-0.5", "eur", []byte{8})
	f.Add("order-1", "SKU-1", uint8(1), "t", "1.", "EUR", []byte{4})
	f.Add("order-1", "SKU-1", uint8(1), "t", "1.5\n", "EUR", []byte{4})
	f.Add("order-1", "SKU-1", uint8(1), "t", strings.Repeat("9", MaxUnitPriceLength+1), "EUR", []byte{4})
	f.Add("order-1", "SKU-1", uint8(1), "t", "1", "EURO", []byte{8})
	f.Add("order-1", "SKU-1", uint8(1), strings.Repeat("t", MaxSnapshotText+1), "1", "EUR", []byte{2})
	f.Add("order-1", "SKU-1", uint8(1), "bell\a", "1", "EUR", []byte{2})
	f.Add("", "SKU-1", uint8(1), "t", "1", "EUR", []byte{})
	f.Add("order-1", ",", uint8(2), "t", "1", "EUR", []byte{})
	f.Add("order-1", "SKU\xff", uint8(1), "t", "1", "EUR", []byte{})

	f.Fuzz(func(t *testing.T, orderRef, skus string, n uint8, title, unitPrice, currency string, shape []byte) {
		parts := strings.Split(skus, ",")
		in := ConfirmInput{ID: "r", OrderRef: orderRef, Lines: make([]OrderLineSnapshot, int(n)%(MaxBasketLines+20))}
		for i := range in.Lines {
			var b byte
			if len(shape) > 0 {
				b = shape[i%len(shape)]
			}
			// Distinct SKUs unless the shape repeats the first one.
			l := OrderLineSnapshot{SKU: parts[i%len(parts)] + strings.Repeat("~", i/len(parts))}
			if b&1 != 0 {
				l.SKU = parts[0]
			}
			if b&2 != 0 {
				l.Title = &title
			}
			if b&4 != 0 {
				l.UnitPrice = &unitPrice
			}
			if b&8 != 0 {
				l.Currency = &currency
			}
			in.Lines[i] = l
		}

		checks := []check{
			{isIdentifier(orderRef), []string{"input", "orderRef"}, nil},
			{len(in.Lines) <= MaxBasketLines, []string{"input", "lines"}, nil},
		}
		seen := map[string]bool{}
		for i, l := range in.Lines {
			path := func(name string) []string { return []string{"input", "lines", fmt.Sprint(i), name} }
			checks = append(checks,
				check{isIdentifier(l.SKU), path("sku"), intp(i)},
				check{!seen[l.SKU], path("sku"), intp(i)})
			seen[l.SKU] = true
			if l.Title != nil {
				checks = append(checks, check{isText(*l.Title, MaxSnapshotText), path("title"), intp(i)})
			}
			if l.UnitPrice != nil {
				checks = append(checks, check{len(*l.UnitPrice) <= MaxUnitPriceLength && isDecimal(*l.UnitPrice), path("unitPrice"), intp(i)})
			}
			if l.Currency != nil {
				checks = append(checks, check{isCurrency(*l.Currency), path("currency"), intp(i)})
			}
		}

		err := in.Validate()
		want := firstFailure(checks...)
		if want == nil {
			if err != nil {
				t.Fatalf("Validate(%+v) = %v, want nil", in, err)
			}
			return
		}
		requireInvalidInput(t, err, want.field, want.line, orderRef, skus, title, unitPrice, currency)
	})
}

// isDecimal: an optional minus, digits, optionally a point and more digits.
func isDecimal(s string) bool {
	whole, frac, dot := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	return allDigits(whole) && (!dot || allDigits(frac))
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// isCurrency: three ASCII capital letters, as ISO 4217 codes are.
func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}
