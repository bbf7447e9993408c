package domain

import (
	"math"
	"strings"
	"testing"
)

// FuzzReceiveStockInputValidate: ReceiveStockInput.Validate accepts exactly
// identifier SKU and location codes, a quantity of 1..MaxQuantity and a
// reference of 1–512 characters of text; a refusal names the first bad field.
func FuzzReceiveStockInputValidate(f *testing.F) {
	f.Add("SKU-1", "AMS", 5, "PO-1")
	f.Add("SKU-1", "AMS", MaxQuantity, strings.Repeat("r", MaxReferenceLength))
	f.Add("SKU-1", "AMS", MaxQuantity+1, "PO-1")
	f.Add("SKU-1", "AMS", 0, "PO-1")
	f.Add("SKU-1", "AMS", -5, "PO-1")
	f.Add("SKU-1", "AMS", math.MaxInt, "PO-1")
	f.Add("SKU-1", "AMS", 5, strings.Repeat("r", MaxReferenceLength+1))
	f.Add("SKU-1", "AMS", 5, "   ")
	f.Add("SKU-1", "AMS", 5, "PO\r\n1")
	f.Add("SKU-1", "", 5, "PO-1")
	f.Add("", "AMS", 5, "PO-1")
	f.Add("SKU\x00", "AMS", 5, "PO-1")
	f.Add("SKU-1", "AMS\xfe", 5, "PO-1")

	f.Fuzz(func(t *testing.T, sku, location string, quantity int, reference string) {
		in := ReceiveStockInput{SKU: sku, Location: location, Quantity: quantity, Reference: reference}
		err := in.Validate()
		want := firstFailure(
			check{isIdentifier(sku), []string{"input", "sku"}, nil},
			check{isIdentifier(location), []string{"input", "location"}, nil},
			check{isQuantity(quantity), []string{"input", "quantity"}, nil},
			check{isText(reference, MaxReferenceLength), []string{"input", "reference"}, nil},
		)
		if want == nil {
			if err != nil {
				t.Fatalf("Validate(%+v) = %v, want nil", in, err)
			}
			return
		}
		requireInvalidInput(t, err, want.field, nil, sku, location, reference)
	})
}

// FuzzAdjustStockInputValidate: AdjustStockInput.Validate accepts exactly
// identifier SKU and location codes, a non-zero delta with |delta| ≤
// MaxQuantity, a reason of 1–64 and a reference of 1–512 characters of text,
// an expectedOnHand, when given, that a balance can hold (0..2^31-1), and a
// requestKey, when given, that is an identifier.
func FuzzAdjustStockInputValidate(f *testing.F) {
	f.Add("SKU-1", "AMS", -3, "damaged", "COUNT-1", false, 0, false, "")
	f.Add("SKU-1", "AMS", 3, "found", "COUNT-1", true, 12, false, "")
	f.Add("SKU-1", "AMS", 0, "found", "COUNT-1", false, 0, false, "")
	f.Add("SKU-1", "AMS", -MaxQuantity, "r", "c", false, 0, false, "")
	f.Add("SKU-1", "AMS", -MaxQuantity-1, "r", "c", false, 0, false, "")
	f.Add("SKU-1", "AMS", math.MinInt, "r", "c", false, 0, false, "")
	f.Add("SKU-1", "AMS", 1, strings.Repeat("r", MaxReasonLength), "c", false, 0, false, "")
	f.Add("SKU-1", "AMS", 1, strings.Repeat("r", MaxReasonLength+1), "c", false, 0, false, "")
	f.Add("SKU-1", "AMS", 1, "r", "", false, 0, false, "")
	f.Add("SKU-1", "AMS", 1, "r", "c", true, -1, false, "")
	f.Add("SKU-1", "AMS", 1, "r", "c", true, maxStoredQuantity, false, "")
	f.Add("SKU-1", "AMS", 1, "r", "c", true, maxStoredQuantity+1, false, "")
	f.Add("SKU-1", "AMS", 1, "r\x1b[31m", "c", false, 0, false, "")
	f.Add("SKU 1", "AMS", 1, "r", "c", false, 0, false, "")
	f.Add("SKU-1", "AMS", -1, "damaged", "RMA-3", false, 0, true, "rma-3-unit-2")
	f.Add("SKU-1", "AMS", -1, "damaged", "RMA-3", false, 0, true, "")
	f.Add("SKU-1", "AMS", -1, "damaged", "RMA-3", false, 0, true, strings.Repeat("k", 129))
	f.Add("SKU-1", "AMS", -1, "damaged", "RMA-3", false, 0, true, "k 1")

	f.Fuzz(func(t *testing.T, sku, location string, delta int, reason, reference string, hasExpected bool, expected int, hasKey bool, key string) {
		in := AdjustStockInput{SKU: sku, Location: location, Delta: delta, Reason: reason, Reference: reference}
		if hasExpected {
			in.ExpectedOnHand = &expected
		}
		if hasKey {
			in.RequestKey = &key
		}
		err := in.Validate()
		want := firstFailure(
			check{isIdentifier(sku), []string{"input", "sku"}, nil},
			check{isIdentifier(location), []string{"input", "location"}, nil},
			check{delta != 0, []string{"input", "delta"}, nil},
			check{delta >= -MaxQuantity && delta <= MaxQuantity, []string{"input", "delta"}, nil},
			check{isText(reason, MaxReasonLength), []string{"input", "reason"}, nil},
			check{isText(reference, MaxReferenceLength), []string{"input", "reference"}, nil},
			check{!hasExpected || (expected >= 0 && expected <= math.MaxInt32), []string{"input", "expectedOnHand"}, nil},
			check{!hasKey || isIdentifier(key), []string{"input", "requestKey"}, nil},
		)
		if want == nil {
			if err != nil {
				t.Fatalf("Validate(%+v) = %v, want nil", in, err)
			}
			return
		}
		requireInvalidInput(t, err, want.field, nil, sku, location, reason, reference, key)
	})
}
