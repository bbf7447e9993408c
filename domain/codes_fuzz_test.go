package domain

import (
	"math"
	"strings"
	"testing"
)

// FuzzCodesInputsValidate covers the inputs of codes.go: ImportCodesInput
// accepts exactly identifier SKU, location and batchRef; SetPreorderInput
// exactly identifier SKU and location with pendingSupply 0..MaxQuantity. A
// refusal names the first bad field, quietly.
func FuzzCodesInputsValidate(f *testing.F) {
	f.Add("GIFTCARD-25", "AMS", "SUPPLIER-2026-11-29", 0)
	f.Add("GIFTCARD-25", "AMS", "SUPPLIER-42", MaxQuantity)
	f.Add("GIFTCARD-25", "AMS", "", MaxQuantity+1)
	f.Add("GIFTCARD-25", "AMS", strings.Repeat("b", MaxIdentifierLength+1), -1)
	f.Add("GIFTCARD-25", "AMS", "batch\nref", math.MinInt)
	f.Add("GIFTCARD-25", "", "b", 1)
	f.Add("", "AMS", "b", 1)
	f.Add("GIFT\x00CARD", "AMS", "b", 1)
	f.Add("GIFTCARD-25", "AMS", "b\xc0\x80", 1)
	f.Add("GIFTCARD-25", "AMS", "sku,loc;ref|x", math.MaxInt)

	f.Fuzz(func(t *testing.T, sku, location, batchRef string, pending int) {
		imp := ImportCodesInput{SKU: sku, Location: location, BatchRef: batchRef}
		err := imp.Validate()
		want := firstFailure(
			check{isIdentifier(sku), []string{"input", "sku"}, nil},
			check{isIdentifier(location), []string{"input", "location"}, nil},
			check{isIdentifier(batchRef), []string{"input", "batchRef"}, nil},
		)
		if want == nil {
			if err != nil {
				t.Fatalf("ImportCodesInput.Validate(%+v) = %v, want nil", imp, err)
			}
		} else {
			requireInvalidInput(t, err, want.field, nil, sku, location, batchRef)
		}

		pre := SetPreorderInput{SKU: sku, Location: location, PendingSupply: pending}
		err = pre.Validate()
		want = firstFailure(
			check{isIdentifier(sku), []string{"input", "sku"}, nil},
			check{isIdentifier(location), []string{"input", "location"}, nil},
			check{pending >= 0 && pending <= MaxQuantity, []string{"input", "pendingSupply"}, nil},
		)
		if want == nil {
			if err != nil {
				t.Fatalf("SetPreorderInput.Validate(%+v) = %v, want nil", pre, err)
			}
			return
		}
		requireInvalidInput(t, err, want.field, nil, sku, location)
	})
}
