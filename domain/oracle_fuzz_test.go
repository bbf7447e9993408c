package domain

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The fuzz targets in this package compare each Validate with an oracle: the
// documented limits (limits.go, README "Limits") restated independently, plus
// the order in which Validate reports the first problem. They share these.

// maxErrorMessageBytes bounds every validation message: an error names the
// field and the limit, and quotes at most one valid identifier (a duplicate
// SKU), never large input.
const maxErrorMessageBytes = 160 + utf8.UTFMax*MaxIdentifierLength

// isIdentifier is CheckIdentifier's contract: 1–128 printable characters.
func isIdentifier(s string) bool {
	if s == "" || !utf8.ValidString(s) || utf8.RuneCountInString(s) > MaxIdentifierLength {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// isText is CheckText's contract: non-blank, valid UTF-8, at most max
// characters, no control characters.
func isText(s string, max int) bool {
	if strings.TrimSpace(s) == "" || !utf8.ValidString(s) || utf8.RuneCountInString(s) > max {
		return false
	}
	return !strings.ContainsFunc(s, unicode.IsControl)
}

func isQuantity(q int) bool { return q >= 1 && q <= MaxQuantity }

// requireInvalidInput checks that err is the *Error Validate promises for a
// refused input: INVALID_INPUT, the field the oracle expects (and line, when
// a basket line is at fault), a bounded message that quotes none of the
// inputs that broke a length limit.
func requireInvalidInput(t *testing.T, err error, field []string, line *int, inputs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want INVALID_INPUT at %v", field)
	}
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("error %T %v is not a *domain.Error", err, err)
	}
	if e.Code != CodeInvalidInput {
		t.Fatalf("code %s, want %s (%v)", e.Code, CodeInvalidInput, e)
	}
	if !slices.Equal(e.Field, field) {
		t.Fatalf("field %q, want %q (%v)", e.Field, field, e)
	}
	requireLine(t, e, line)
	if e.SKU != "" || e.Available != nil {
		t.Fatalf("INVALID_INPUT with SKU %q and Available %v: %v", e.SKU, e.Available, e)
	}
	requireQuietMessage(t, e.Message, inputs...)
}

func requireLine(t *testing.T, e *Error, line *int) {
	t.Helper()
	switch {
	case line == nil && e.Line != nil:
		t.Fatalf("line %d set for a request-level error %v", *e.Line, e)
	case line != nil && (e.Line == nil || *e.Line != *line):
		t.Fatalf("line %v, want %d (%v)", e.Line, *line, e)
	}
}

// limitFault is the LIMIT_EXCEEDED error the oracle expects for a fair-use
// limit: its field, line, SKU and available units (nil where the error has
// none), the limit (which the message states) and the setting that configures
// it (which the message names).
type limitFault struct {
	field     []string
	line      *int
	sku       string
	available *int
	limit     int
	setting   string
}

// requireLimitExceeded checks that err is exactly the LIMIT_EXCEEDED error
// want describes, with a bounded message that states the limit, names the
// setting and quotes no over-long input.
func requireLimitExceeded(t *testing.T, err error, want limitFault, inputs ...string) {
	t.Helper()
	e := requireLimitFault(t, err, want)
	requireQuietMessage(t, e.Message, inputs...)
}

// requireLimitFault checks err as requireLimitExceeded does, but for the
// message only that it states the limit and names the setting.
func requireLimitFault(t *testing.T, err error, want limitFault) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want LIMIT_EXCEEDED at %v", want.field)
	}
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("error %T %v is not a *domain.Error", err, err)
	}
	if e.Code != CodeLimitExceeded {
		t.Fatalf("code %s, want %s (%v)", e.Code, CodeLimitExceeded, e)
	}
	if !slices.Equal(e.Field, want.field) {
		t.Fatalf("field %q, want %q (%v)", e.Field, want.field, e)
	}
	requireLine(t, e, want.line)
	if e.SKU != want.sku {
		t.Fatalf("SKU %q, want %q (%v)", e.SKU, want.sku, e)
	}
	switch {
	case want.available == nil && e.Available != nil:
		t.Fatalf("available %d set for %v", *e.Available, e)
	case want.available != nil && (e.Available == nil || *e.Available != *want.available):
		t.Fatalf("available %v, want %d (%v)", e.Available, *want.available, e)
	}
	if !strings.Contains(e.Message, strconv.Itoa(want.limit)) || !strings.Contains(e.Message, want.setting) {
		t.Fatalf("message %q does not state the limit %d and the setting %s", e.Message, want.limit, want.setting)
	}
	return e
}

// positive maps a fuzzed int onto the positive ints a FairUse field holds
// (the configuration never sets zero or less): itself when positive, else
// -(v+1), at least 1, so that small negatives give small limits.
func positive(v int) int {
	if v >= 1 {
		return v
	}
	return max(-(v + 1), 1)
}

// requireQuietMessage: a message is short, valid UTF-8, and does not contain
// any input longer than an identifier may be.
func requireQuietMessage(t *testing.T, msg string, inputs ...string) {
	t.Helper()
	if msg == "" || len(msg) > maxErrorMessageBytes || !utf8.ValidString(msg) {
		t.Fatalf("message %q: want 1..%d bytes of UTF-8", msg, maxErrorMessageBytes)
	}
	for _, in := range inputs {
		if utf8.RuneCountInString(in) > MaxIdentifierLength && strings.Contains(msg, in) {
			t.Fatalf("message quotes a %d-byte input back: %q", len(in), msg)
		}
	}
}

// firstFailure runs checks in order and returns the field of the first that
// fails, or nil when all pass: the oracle's model of "Validate reports the
// first problem".
type check struct {
	ok    bool
	field []string
	line  *int
}

func firstFailure(checks ...check) *check {
	for i := range checks {
		if !checks[i].ok {
			return &checks[i]
		}
	}
	return nil
}

func intp(i int) *int { return &i }
