package cursor

import (
	"slices"
	"strings"
	"testing"
)

var (
	secretA = []byte(strings.Repeat("a", 32))
	secretB = []byte(strings.Repeat("b", 32))
)

func mustSigner(t testing.TB, secrets ...[]byte) *Signer {
	t.Helper()
	s, err := New(secrets...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCursorRoundTrip: a cursor opens as the list it was signed for, to its
// fields; under another kind, scope, field count or key it does not; a key
// ring's older secret still opens what it signed.
func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	s := mustSigner(t, secretA)
	list := List{Kind: "reservations", Scope: "cart-A"}
	fields := []string{"1767225600000000", "0b4f3c1e-0000-4000-8000-000000000001"}
	c := s.Sign(list, fields...)
	if got, err := s.Open(c, list, 2); err != nil || !slices.Equal(got, fields) {
		t.Fatalf("Open = %q, %v; want %q", got, err, fields)
	}
	for name, open := range map[string]func() ([]string, error){
		"another scope":       func() ([]string, error) { return s.Open(c, List{Kind: "reservations", Scope: "cart-B"}, 2) },
		"another kind":        func() ([]string, error) { return s.Open(c, List{Kind: "balances", Scope: "cart-A"}, 2) },
		"scope moved to kind": func() ([]string, error) { return s.Open(c, List{Kind: "reservationscart-A"}, 2) },
		"another field count": func() ([]string, error) { return s.Open(c, list, 1) },
		"another key":         func() ([]string, error) { return mustSigner(t, secretB).Open(c, list, 2) },
		"empty":               func() ([]string, error) { return s.Open("", list, 2) },
		"too long":            func() ([]string, error) { return s.Open(c+strings.Repeat("A", MaxLength), list, 2) },
	} {
		if got, err := open(); err != ErrInvalid {
			t.Errorf("%s: Open = %q, %v; want ErrInvalid", name, got, err)
		}
	}
	rotated := mustSigner(t, secretB, secretA)
	if got, err := rotated.Open(c, list, 2); err != nil || !slices.Equal(got, fields) {
		t.Fatalf("after rotation the old key's cursor: %q, %v", got, err)
	}
	if strings.ContainsAny(c, "+/=") {
		t.Fatalf("cursor %q is not unpadded base64url", c)
	}
}

// FuzzCursorTamper: for any fields and list, the signed cursor opens to
// exactly those fields, and every single-character edit of it (any other
// character at any position), every truncation and every extension is
// refused: a tampered cursor never verifies. Any string at all opens only
// if it is exactly what Sign wrote for it (re-signing its fields gives it
// back), so nothing but a signed cursor is ever accepted.
func FuzzCursorTamper(f *testing.F) {
	f.Add("SKU-1", "AMS", "balances", "", 0, byte('A'), "x")
	f.Add("", "", "reservations", "cart-A", 5, byte('_'), "")
	f.Add("日本", "\x00\xff", "reconciliation", "", 40, byte('-'), "QUFB")
	f.Add(strings.Repeat("s", 300), "l", "deliveries", "0b4f3c1e-0000-4000-8000-000000000001", 1000, byte('0'), "AQ")
	s := mustSigner(f, secretA, secretB)
	f.Fuzz(func(t *testing.T, a, b, kind, scope string, pos int, ch byte, junk string) {
		list := List{Kind: kind, Scope: scope}
		c := s.Sign(list, a, b)
		got, err := s.Open(c, list, 2)
		if len(c) <= MaxLength && (err != nil || !slices.Equal(got, []string{a, b})) {
			t.Fatalf("Open(Sign(%q, %q)) = %q, %v", a, b, got, err)
		}
		i := (pos%len(c) + len(c)) % len(c)
		if ch != c[i] {
			edited := c[:i] + string(ch) + c[i+1:]
			if got, err := s.Open(edited, list, 2); err == nil {
				t.Fatalf("edited cursor %q (char %d of %q) verified as %q", edited, i, c, got)
			}
		}
		if got, err := s.Open(c[:i], list, 2); err == nil {
			t.Fatalf("truncated cursor %q verified as %q", c[:i], got)
		}
		if junk != "" {
			if got, err := s.Open(c+junk, list, 2); err == nil {
				t.Fatalf("extended cursor %q verified as %q", c+junk, got)
			}
		}
		if got, err := s.Open(junk, list, 2); err == nil && s.Sign(list, got...) != junk {
			t.Fatalf("%q verified as %q but is not what Sign writes for them", junk, got)
		}
	})
}
