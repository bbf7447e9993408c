package domain

import (
	"math"
	"strings"
	"testing"
)

// FuzzOrderChangeInputValidate: OrderChangeInput.Validate (a fulfil's or a
// cancel's) accepts exactly an identifier orderRef and reference, for a
// cancel a reason of 1–64 characters of text, and lines that are either
// omitted or 1..MaxBasketLines of identifier SKU and location with a
// quantity of 1..MaxQuantity, each (SKU, location) once; a refusal names
// the first bad field, and the line for a line's fault.
func FuzzOrderChangeInputValidate(f *testing.F) {
	f.Add(false, "ORD-1", "parcel-1", "", false, "S", "WH", 1, "T", "WH", 2)
	f.Add(true, "ORD-1", "cancel-1", "customer_request", true, "S", "WH", 1, "T", "WH", 2)
	f.Add(true, "ORD-1", "cancel-1", "", false, "S", "WH", 1, "T", "WH", 2)
	f.Add(true, "ORD-1", "cancel-1", strings.Repeat("r", MaxReasonLength+1), false, "S", "WH", 1, "T", "WH", 2)
	f.Add(false, "ORD-1", "p", "", true, "S", "WH", 1, "S", "WH", 2)
	f.Add(false, "ORD-1", "p", "", true, "S", "WH", 1, "S", "AMS", 2)
	f.Add(false, "ORD-1", "p", "", true, "S", "WH", 0, "T", "WH", 2)
	f.Add(false, "ORD-1", "p", "", true, "S", "WH", 1, "T", "WH", MaxQuantity+1)
	f.Add(false, "ORD-1", "p", "", true, "S", "WH", math.MinInt, "T", "", 2)
	f.Add(false, "", "p", "", false, "S", "WH", 1, "T", "WH", 2)
	f.Add(false, "ORD-1", strings.Repeat("k", MaxIdentifierLength+1), "", false, "S", "WH", 1, "T", "WH", 2)
	f.Add(false, "ORD\x00", "p", "", true, "S\xfe", "WH", 1, "T", "WH", 2)

	f.Fuzz(func(t *testing.T, cancel bool, orderRef, reference, reason string, withLines bool,
		sku0, loc0 string, q0 int, sku1, loc1 string, q1 int) {
		in := OrderChangeInput{OrderRef: orderRef, Reference: reference, Reason: reason}
		if withLines {
			in.Lines = []OrderQuantity{{sku0, loc0, q0}, {sku1, loc1, q1}}
		}
		err := in.Validate(cancel)
		checks := []check{
			{isIdentifier(orderRef), []string{"input", "orderRef"}, nil},
			{isIdentifier(reference), []string{"input", "reference"}, nil},
			{!cancel || isText(reason, MaxReasonLength), []string{"input", "reason"}, nil},
		}
		if withLines {
			checks = append(checks,
				check{isIdentifier(sku0), []string{"input", "lines", "0", "sku"}, intp(0)},
				check{isIdentifier(loc0), []string{"input", "lines", "0", "location"}, intp(0)},
				check{isQuantity(q0), []string{"input", "lines", "0", "quantity"}, intp(0)},
				check{isIdentifier(sku1), []string{"input", "lines", "1", "sku"}, intp(1)},
				check{isIdentifier(loc1), []string{"input", "lines", "1", "location"}, intp(1)},
				check{isQuantity(q1), []string{"input", "lines", "1", "quantity"}, intp(1)},
				check{sku0 != sku1 || loc0 != loc1, []string{"input", "lines", "1", "sku"}, intp(1)},
			)
		}
		want := firstFailure(checks...)
		if want == nil {
			if err != nil {
				t.Fatalf("Validate(%+v, cancel %v) = %v, want nil", in, cancel, err)
			}
			return
		}
		requireInvalidInput(t, err, want.field, want.line, orderRef, reference, reason, sku0, loc0, sku1, loc1)
	})
}
