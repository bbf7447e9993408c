package domain

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// FuzzExtendInputValidate: ExtendInput.Validate refuses a ttlSeconds outside
// 1..MaxHoldTTL as INVALID_INPUT at input.ttlSeconds; otherwise, when the
// fuzzer gave it fair-use Limits (positive fields), a ttlSeconds above
// Limits.MaxHoldTTL as LIMIT_EXCEEDED at input.ttlSeconds (no Line, SKU or
// Available; the message states the limit and names
// INVENTORY_CHECKOUT_MAX_HOLD_TTL); it accepts everything else, whatever the
// id and the other limits.
func FuzzExtendInputValidate(f *testing.F) {
	f.Add("r-1", 900, false, 0)
	f.Add("r-1", 1, false, 0)
	f.Add("r-1", MaxHoldTTL, false, 0)
	f.Add("r-1", MaxHoldTTL+1, false, 0)
	f.Add("r-1", 0, false, 0)
	f.Add("r-1", math.MinInt, false, 0)
	f.Add("r-1", math.MaxInt, true, 1800)
	f.Add("r-1", 1800, true, 1800)
	f.Add("r-1", 1801, true, 1800)
	f.Add("r-1", 0, true, 1800)
	f.Add("r-1", 1, true, 1)
	f.Add("r-1", 2, true, 1)
	f.Add("r-1", 2, true, math.MinInt)
	f.Add("r-1", MaxHoldTTL, true, MaxHoldTTL)
	f.Add("r-1", MaxHoldTTL, true, MaxHoldTTL-1)
	f.Add("r-1", MaxHoldTTL+1, true, math.MaxInt)
	f.Add(strings.Repeat("i", MaxIdentifierLength+1), 900, true, 60)

	f.Fuzz(func(t *testing.T, id string, ttl int, limited bool, maxTTL int) {
		in := ExtendInput{ID: id, TTLSeconds: ttl}
		if limited {
			in.Limits = &FairUse{MaxHoldTTL: positive(maxTTL), MaxHoldLifetime: positive(maxTTL - 1),
				MaxUnitsPerSKU: positive(ttl), MaxLiveHolds: positive(-ttl)}
		}
		err := in.Validate()
		switch {
		case ttl < 1 || ttl > MaxHoldTTL:
			requireInvalidInput(t, err, []string{"input", "ttlSeconds"}, nil, id)
		case in.Limits != nil && ttl > in.Limits.MaxHoldTTL:
			requireLimitExceeded(t, err, limitFault{field: []string{"input", "ttlSeconds"},
				limit: in.Limits.MaxHoldTTL, setting: "INVENTORY_CHECKOUT_MAX_HOLD_TTL"}, id)
		case err != nil:
			t.Fatalf("Validate(%+v) = %v, want nil", in, err)
		}
		// Neither the id nor the limits other than MaxHoldTTL matter.
		again := ExtendInput{ID: "", TTLSeconds: ttl}
		if in.Limits != nil {
			again.Limits = &FairUse{MaxHoldTTL: in.Limits.MaxHoldTTL, MaxHoldLifetime: 1, MaxUnitsPerSKU: 1, MaxLiveHolds: 1}
		}
		if err2 := again.Validate(); (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("Validate(%+v) = %v but Validate(%+v) = %v", in, err, again, err2)
		}
	})
}

// FuzzFairUseChecks: the four checks of a FairUse, called directly. A nil
// *FairUse (a trusted caller) allows everything. Otherwise (positive fields)
// each allows exactly up to its threshold and refuses past it with
// LIMIT_EXCEEDED, a fixed field, a message that states the limit and names
// its setting, and nothing more:
//
//   - CheckTTL(ttl) refuses ttl > MaxHoldTTL, at input.ttlSeconds;
//   - CheckHolds(live) refuses live >= MaxLiveHolds, at input.checkoutId;
//   - CheckUnits(line, sku, held, more) refuses held+more > MaxUnitsPerSKU,
//     at input.lines.<line>.quantity with that Line and SKU, and Available
//     the units still allowed, max(MaxUnitsPerSKU-held, 0);
//   - CheckLifetime(after) refuses after > MaxHoldLifetime as real numbers
//     (so also NaN and +Inf), at input.ttlSeconds.
//
// Also: For gives a copy of the limits to a checkout token's actor and nil to
// any other role.
func FuzzFairUseChecks(f *testing.F) {
	// isNil, maxTTL, maxLifetime, maxUnits, maxLive, ttl, live, line, sku, held, more, after, role
	f.Add(false, 1800, 3600, 10, 20, 1800, 19, 0, "SKU-1", uint32(0), uint32(10), 3600.0, "CHECKOUT")
	f.Add(false, 1800, 3600, 10, 20, 1801, 20, 3, "SKU-1", uint32(4), uint32(7), 3600.5, "SERVICE")
	f.Add(false, 1800, 3600, 10, 20, 1801, 21, 99, "SKU-1", uint32(11), uint32(1), math.Nextafter(3600, 4000), "ADMIN")
	f.Add(false, 1, 1, 1, 1, 1, 0, 0, "S", uint32(0), uint32(1), 1.0, "ANONYMOUS")
	f.Add(false, 1, 1, 1, 1, 2, 1, 0, "S", uint32(1), uint32(0), 1.0000000001, "checkout")
	f.Add(false, 1, 1, 1, 1, 0, -1, -1, "S", uint32(0), uint32(0), math.Inf(1), "")
	f.Add(false, 1, 1, 1, 1, math.MinInt, math.MinInt, 0, "S", uint32(math.MaxUint32), uint32(math.MaxUint32), math.Inf(-1), "CHECKOUT")
	f.Add(false, math.MaxInt, math.MaxInt, math.MaxInt, math.MaxInt, math.MaxInt, math.MaxInt, 0, "S", uint32(math.MaxUint32), uint32(math.MaxUint32), math.NaN(), "CHECKOUT")
	f.Add(false, 0, 0, 0, 0, 1, 1, 0, "S", uint32(2), uint32(0), 0.0, "CHECKOUT")
	f.Add(false, MaxHoldTTL, MaxHoldTTL, MaxQuantity, 1_000_000, MaxHoldTTL+1, 1_000_000, 5, strings.Repeat("s", MaxIdentifierLength), uint32(MaxQuantity), uint32(1), float64(MaxHoldTTL)+1e-9, "CHECKOUT")
	f.Add(false, 1800, 1<<53, 10, 20, 1800, 19, 0, "日本語", uint32(3), uint32(8), float64(1<<53), "CHECKOUT")
	f.Add(false, 1800, 1<<53, 10, 20, 1800, 19, 0, "SKU\x00", uint32(3), uint32(8), float64(1<<53+2), "CHECKOUT")
	f.Add(true, 1800, 3600, 10, 20, math.MaxInt, math.MaxInt, 0, strings.Repeat("s", MaxIdentifierLength+1), uint32(math.MaxUint32), uint32(math.MaxUint32), math.NaN(), "CHECKOUT")
	f.Add(true, 1, 1, 1, 1, 2, 1, 0, "S", uint32(1), uint32(1), math.Inf(1), "SERVICE")

	f.Fuzz(func(t *testing.T, isNil bool, maxTTL, maxLifetime, maxUnits, maxLive, ttl, live, line int, sku string, held32, more32 uint32, after float64, role string) {
		lifetime := positive(maxLifetime)
		if lifetime > 1<<53 {
			// float64 holds every integer up to 2^53; the configuration
			// bounds the lifetime to a day.
			lifetime = lifetime%(1<<53) + 1
		}
		limits := FairUse{MaxHoldTTL: positive(maxTTL), MaxHoldLifetime: lifetime, MaxUnitsPerSKU: positive(maxUnits), MaxLiveHolds: positive(maxLive)}
		held, more := int(held32), int(more32) // counts of units: never negative, and their sum fits

		if isNil {
			var none *FairUse
			for _, err := range []error{none.CheckTTL(ttl), none.CheckHolds(live), none.CheckUnits(line, sku, held, more), none.CheckLifetime(after)} {
				if err != nil {
					t.Fatalf("a nil *FairUse refused: %v", err)
				}
			}
			return
		}
		fu := &limits

		if err := fu.CheckTTL(ttl); ttl > limits.MaxHoldTTL {
			requireLimitExceeded(t, err, limitFault{field: []string{"input", "ttlSeconds"},
				limit: limits.MaxHoldTTL, setting: "INVENTORY_CHECKOUT_MAX_HOLD_TTL"})
		} else if err != nil {
			t.Fatalf("CheckTTL(%d) with MaxHoldTTL %d = %v", ttl, limits.MaxHoldTTL, err)
		}

		if err := fu.CheckHolds(live); live >= limits.MaxLiveHolds {
			requireLimitExceeded(t, err, limitFault{field: []string{"input", "checkoutId"},
				limit: limits.MaxLiveHolds, setting: "INVENTORY_CHECKOUT_MAX_LIVE_HOLDS"})
		} else if err != nil {
			t.Fatalf("CheckHolds(%d) with MaxLiveHolds %d = %v", live, limits.MaxLiveHolds, err)
		}

		if err := fu.CheckUnits(line, sku, held, more); held+more > limits.MaxUnitsPerSKU {
			left := limits.MaxUnitsPerSKU - held
			if left < 0 {
				left = 0
			}
			want := limitFault{field: []string{"input", "lines", strconv.Itoa(line), "quantity"}, line: intp(line), sku: sku,
				available: &left, limit: limits.MaxUnitsPerSKU, setting: "INVENTORY_CHECKOUT_MAX_UNITS_PER_SKU"}
			if isIdentifier(sku) {
				requireLimitExceeded(t, err, want, sku)
			} else {
				// Callers pass validated SKUs only, and the message quotes it.
				requireLimitFault(t, err, want)
			}
		} else if err != nil {
			t.Fatalf("CheckUnits(%d, %q, %d, %d) with MaxUnitsPerSKU %d = %v", line, sku, held, more, limits.MaxUnitsPerSKU, err)
		}

		if err := fu.CheckLifetime(after); !atMost(after, limits.MaxHoldLifetime) {
			requireLimitExceeded(t, err, limitFault{field: []string{"input", "ttlSeconds"},
				limit: limits.MaxHoldLifetime, setting: "INVENTORY_CHECKOUT_MAX_HOLD_LIFETIME"})
		} else if err != nil {
			t.Fatalf("CheckLifetime(%v) with MaxHoldLifetime %d = %v", after, limits.MaxHoldLifetime, err)
		}

		got := limits.For(Actor{Role: Role(role)})
		switch {
		case Role(role) != RoleCheckout && got != nil:
			t.Fatalf("For(%q) = %+v, want nil", role, *got)
		case Role(role) == RoleCheckout && (got == nil || *got != limits || got == fu):
			t.Fatalf("For(CHECKOUT) = %v, want a copy of %+v", got, limits)
		}
	})
}

// atMost reports whether x ≤ limit as real numbers, for 1 ≤ limit ≤ 2^53,
// without converting limit to a float: NaN is not, and a finite x is when its
// ceiling is.
func atMost(x float64, limit int) bool {
	switch {
	case math.IsNaN(x):
		return false
	case x <= 0:
		return true
	case x >= 1<<62:
		return false
	}
	return int64(math.Ceil(x)) <= int64(limit)
}
