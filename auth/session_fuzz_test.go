package auth

import (
	"context"
	"strings"
	"testing"
	"time"

	"inventory/domain"
)

// FuzzSessionCookie: no cookie value but the one SignIn issued resolves to
// an admin, whatever the bytes (a changed kid, id, expiry or signature, extra
// or missing fields); parsing never panics.
func FuzzSessionCookie(f *testing.F) {
	keys := keysByHash{"inv_admin": {Name: "ops", Role: domain.RoleAdmin}}
	store := &memSessions{keys: keys, sessions: map[string][]byte{}}
	s, err := NewSessions(store, time.Hour, []byte(strings.Repeat("b", 32)), []byte(strings.Repeat("a", 32)))
	if err != nil {
		f.Fatal(err)
	}
	c, err := s.SignIn(context.Background(), "inv_admin", false)
	if err != nil {
		f.Fatal(err)
	}
	parts := strings.Split(c.Value, ".")
	f.Add(c.Value)
	f.Add(c.Value + ".")
	f.Add(strings.Join(parts[1:], "."))
	f.Add(parts[0] + "." + parts[1] + ".99999999999." + parts[3])
	f.Add("")
	f.Add("....")
	f.Fuzz(func(t *testing.T, v string) {
		a, err := s.Actor(context.Background(), v)
		if err != nil {
			t.Fatal(err)
		}
		if a.Role != domain.RoleAnonymous && v != c.Value {
			t.Fatalf("cookie %q (not the issued one) resolved to %+v", v, a)
		}
	})
}
