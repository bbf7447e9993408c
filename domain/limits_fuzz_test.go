package domain

import (
	"math"
	"strings"
	"testing"
)

// FuzzLimits checks the three checks of limits.go on the same inputs (one
// target rather than three keeps scripts/fuzz.sh short):
//   - CheckIdentifier accepts exactly 1–128 printable characters of valid
//     UTF-8;
//   - CheckText, at each limit it is used with, accepts exactly non-blank
//     valid UTF-8 without control characters of at most max characters;
//   - CheckQuantity accepts exactly 1..MaxQuantity.
//
// A refusal is INVALID_INPUT on the given field, and its message never
// contains the (non-blank) value.
func FuzzLimits(f *testing.F) {
	values := []string{"", " ", "\t\n", "SKU-1", "a b", "  padded  ", "ä", "日本", "🙂",
		strings.Repeat("x", MaxIdentifierLength), strings.Repeat("x", MaxIdentifierLength+1),
		strings.Repeat("é", MaxIdentifierLength), strings.Repeat("n", MaxNameLength+1), strings.Repeat("€", MaxReasonLength+1),
		"\xff", "\xc3", "a\x00b", "tab\there", "nl\n", "bell\a", "\u0085", "\u200b", "\u2028", "\u202e", "a\u00a0b", "sku\x00loc"}
	quantities := []int{0, 1, -1, MaxQuantity, MaxQuantity + 1, maxStoredQuantity, math.MaxInt, math.MinInt}
	for i, v := range values {
		f.Add(v, uint8(i), quantities[i%len(quantities)])
	}
	textLimits := []int{MaxNameLength, MaxReasonLength, MaxReferenceLength, MaxSnapshotText}
	idField := []string{"input", "checkoutId"}
	textField := []string{"input", "reference"}
	qtyField := []string{"input", "quantity"}

	f.Fuzz(func(t *testing.T, value string, which uint8, q int) {
		err := CheckIdentifier(idField, value)
		switch {
		case isIdentifier(value) && err != nil:
			t.Fatalf("CheckIdentifier(%q) = %v, want nil", value, err)
		case !isIdentifier(value):
			requireInvalidInput(t, err, idField, nil)
			if value != "" && strings.Contains(err.(*Error).Message, value) {
				t.Fatalf("message %q contains the value %q", err.(*Error).Message, value)
			}
		}

		max := textLimits[int(which)%len(textLimits)]
		err = CheckText(textField, value, max)
		switch {
		case isText(value, max) && err != nil:
			t.Fatalf("CheckText(%q, %d) = %v, want nil", value, max, err)
		case !isText(value, max):
			requireInvalidInput(t, err, textField, nil)
			if strings.TrimSpace(value) != "" && strings.Contains(err.(*Error).Message, value) {
				t.Fatalf("message %q contains the value %q", err.(*Error).Message, value)
			}
		}

		err = CheckQuantity(qtyField, q)
		switch {
		case isQuantity(q) && err != nil:
			t.Fatalf("CheckQuantity(%d) = %v, want nil", q, err)
		case !isQuantity(q):
			requireInvalidInput(t, err, qtyField, nil)
		}
	})
}
