package domain

import (
	"math"
	"strings"
	"testing"
)

// FuzzJoinWaitlistInputValidate: JoinWaitlistInput.Validate accepts exactly
// the joins whose identifiers pass CheckIdentifier, whose quantity is
// 1..MaxQuantity and ttlSeconds 1..MaxWaitlistTTL and, with fair-use Limits,
// whose ttlSeconds is within MaxWaitlistTTL and quantity within
// MaxUnitsPerSKU. Every refusal is a business error naming an input field:
// INVALID_INPUT, or LIMIT_EXCEEDED only when Limits bind. A limited join's
// offer TTL is the reserve default capped by MaxHoldTTL.
func FuzzJoinWaitlistInputValidate(f *testing.F) {
	f.Add("c-1", "k-1", "SKU", "AMS", true, 1, 3600, false, 0, 0, 0)
	f.Add("c-1", "k-1", "SKU", "", false, 1, 3600, true, 3600, 10, 1800)
	f.Add("c-1", "k-1", "SKU", "", false, 11, 60, true, 3600, 10, 1800)
	f.Add("c-1", "k-1", "SKU", "", false, 1, 3601, true, 3600, 10, 1800)
	f.Add("c-1", "k-1", "SKU", "", false, 0, 60, false, 0, 0, 0)
	f.Add("c-1", "k-1", "SKU", "", false, MaxQuantity+1, 60, false, 0, 0, 0)
	f.Add("c-1", "k-1", "SKU", "", false, 1, MaxWaitlistTTL+1, false, 0, 0, 0)
	f.Add("c-1", "k-1", "SKU", "", false, 1, 0, false, 0, 0, 0)
	f.Add("", "k-1", "SKU", "", false, 1, 60, false, 0, 0, 0)
	f.Add("c-1", "k\x00", "SKU", "", false, 1, 60, false, 0, 0, 0)
	f.Add("c-1", "k-1", strings.Repeat("s", MaxIdentifierLength+1), "", false, 1, 60, false, 0, 0, 0)
	f.Add("c-1", "k-1", "SKU", "", true, 1, 60, false, 0, 0, 0)
	f.Add("c-1", "k-1", "SKU", "AMS", true, math.MaxInt, math.MinInt, true, 1, 1, 60)

	f.Fuzz(func(t *testing.T, checkout, key, sku, location string, located bool, quantity, ttl int, limited bool, maxWait, maxUnits, maxHold int) {
		in := JoinWaitlistInput{CheckoutID: checkout, RequestKey: key, SKU: sku, Quantity: quantity, TTLSeconds: ttl}
		if located {
			in.Location = &location
		}
		if limited {
			in.Limits = &FairUse{MaxHoldTTL: positive(maxHold), MaxHoldLifetime: positive(maxHold), MaxUnitsPerSKU: positive(maxUnits),
				MaxLiveHolds: 1, MaxWaitlistTTL: positive(maxWait)}
		}
		err := in.Validate()
		valid := CheckIdentifier(nil, checkout) == nil && CheckIdentifier(nil, key) == nil && CheckIdentifier(nil, sku) == nil &&
			(!located || CheckIdentifier(nil, location) == nil) &&
			quantity >= 1 && quantity <= MaxQuantity && ttl >= 1 && ttl <= MaxWaitlistTTL
		withinLimits := in.Limits == nil || ttl <= in.Limits.MaxWaitlistTTL && quantity <= in.Limits.MaxUnitsPerSKU
		if (err == nil) != (valid && withinLimits) {
			t.Fatalf("Validate(%+v) = %v; valid %v, within limits %v", in, err, valid, withinLimits)
		}
		if err != nil {
			e, ok := AsError(err)
			if !ok || len(e.Field) != 2 || e.Field[0] != "input" {
				t.Fatalf("Validate(%+v) = %#v, want a business error naming an input field", in, err)
			}
			requireQuietMessage(t, e.Message, checkout, key, sku, location)
			switch {
			case e.Code == CodeLimitExceeded && (in.Limits == nil || !valid):
				t.Fatalf("Validate(%+v) = %v: LIMIT_EXCEEDED for an input that is invalid or unlimited", in, err)
			case e.Code != CodeLimitExceeded && e.Code != CodeInvalidInput:
				t.Fatalf("Validate(%+v) = %v: unexpected code", in, err)
			}
		}
		if o := in.Limits.OfferTTL(); o < 1 || o > DefaultHoldTTL || in.Limits != nil && o > in.Limits.MaxHoldTTL {
			t.Fatalf("OfferTTL with %+v = %d", in.Limits, o)
		}
	})
}
