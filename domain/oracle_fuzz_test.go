package domain

import (
	"slices"
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
	switch {
	case line == nil && e.Line != nil:
		t.Fatalf("line %d set for a request-level error %v", *e.Line, e)
	case line != nil && (e.Line == nil || *e.Line != *line):
		t.Fatalf("line %v, want %d (%v)", e.Line, *line, e)
	}
	requireQuietMessage(t, e.Message, inputs...)
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
